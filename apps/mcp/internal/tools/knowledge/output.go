package knowledge

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// outputSchema is the outputSchema of a tool whose answers are Out (a
// pointer to a domain result, as its handler returns it), or any of the
// variants (get_knowledge: a forgotten entry answers its tombstone). It is
// inferred from the very types the handler marshals, so a field added to a
// domain type shows in the schema, and a test validates every answer of the
// MCP test suite against the schema tools/list publishes
// (apps/mcp/internal/server, TestMain).
//
// Every answer of a tool is one object: the result, or, with isError, the
// error payload {"error": {code, field?, message, ...}}. MCP wants the
// structured content of every answer to satisfy the schema, and clients
// (the TypeScript SDK) validate error results too, so the schema is the
// union of all: every variant's properties plus "error", and anyOf one
// variant's required properties or "error". It stays closed
// (additionalProperties: false), so an undeclared field fails the test.
func outputSchema[Out any](variants ...any) *jsonschema.Schema {
	var s *jsonschema.Schema
	var anyOf []*jsonschema.Schema
	for _, v := range append([]reflect.Type{reflect.TypeFor[Out]()}, typesOf(variants)...) {
		for v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		vs, err := jsonschema.ForType(v, &jsonschema.ForOptions{TypeSchemas: outputTypeSchemas})
		if err != nil {
			panic(fmt.Sprintf("output schema of %v: %v", v, err)) // a programming error
		}
		anyOf = append(anyOf, &jsonschema.Schema{Required: vs.Required})
		if s == nil {
			s = vs
			continue
		}
		for _, name := range vs.PropertyOrder {
			have, ok := s.Properties[name]
			if !ok {
				s.Properties[name] = vs.Properties[name]
				s.PropertyOrder = append(s.PropertyOrder, name)
				continue
			}
			// The same name in two variants with two shapes (an entry's
			// relations, a tombstone's count of them): either.
			if a, b := rawJSON(have), rawJSON(vs.Properties[name]); a != b {
				s.Properties[name] = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{have, vs.Properties[name]}}
			}
		}
	}
	errSchema, err := jsonschema.For[ErrorBody](nil)
	if err != nil {
		panic(fmt.Sprintf("output schema of the error body: %v", err))
	}
	errSchema.Description = "Set instead of the result when the call failed (isError: true): a stable code, the argument at fault and the rule it broke."
	errSchema.Properties["code"].Enum = errorCodes()
	s.Properties["error"] = errSchema
	s.PropertyOrder = append(s.PropertyOrder, "error")
	s.AnyOf = append(anyOf, &jsonschema.Schema{Required: []string{"error"}})
	s.Required = nil
	return s
}

func typesOf(vs []any) []reflect.Type {
	ts := make([]reflect.Type, len(vs))
	for i, v := range vs {
		ts[i] = reflect.TypeOf(v)
	}
	return ts
}

// outputTypeSchemas are the JSON forms of the types whose Go shape is not
// what they marshal to.
var outputTypeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[uuid.UUID](): {Type: "string", Format: "uuid"},
	reflect.TypeFor[time.Time](): {Type: "string", Format: "date-time"},
}

// errorCodes are the codes a tool error may carry (docs/mcp.md, "Tool
// errors").
func errorCodes() []any {
	return []any{
		string(errs.CodeInvalidArgument), string(errs.CodeNotFound), string(errs.CodeForbidden),
		string(errs.CodeConflict), string(errs.CodeCycle), string(errs.CodeQuotaExceeded),
		string(errs.CodeRateLimited), string(errs.CodeUnavailable), string(errs.CodeInternal),
	}
}

func rawJSON(s *jsonschema.Schema) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rawSchema marshals s once for tools/list (see addTool: the go-sdk would
// marshal a *jsonschema.Schema by reflection on every call otherwise).
func rawSchema(name string, s *jsonschema.Schema) json.RawMessage {
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Errorf("tool %s: marshal schema: %w", name, err)) // a programming error
	}
	return raw
}
