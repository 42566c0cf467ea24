package knowledge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSchemasAndEdgeChecksAgree feeds the same arguments to the advertised
// schema (validated by jsonschema-go, as a client would) and to the edge
// decoding and checks: both must accept or both refuse. Rules the schema
// cannot state (blank text, NUL, expiry in the future, oldId = newId) are
// edge-only and listed as such. Kebab-case after normalisation is the
// domain's rule alone (the server's tests see it refused as tags[i]).
func TestSchemasAndEdgeChecksAgree(t *testing.T) {
	id, id2 := uuid.NewString(), uuid.NewString()
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	cases := []struct {
		tool     *mcp.Tool
		args     string
		valid    bool
		edgeOnly bool
	}{
		{storeTool(), `{"title":"t","body":"b"}`, true, false},
		{storeTool(), `{"title":"t","body":"b","tags":["A-b","c"],"confidence":0,"expiresAt":"` + future + `","taskRef":{"taskId":"` + id + `","kind":"references"},"clientToken":"` + id2 + `"}`, true, false},
		{storeTool(), `{"body":"b"}`, false, false},
		{storeTool(), `{"title":"","body":"b"}`, false, false},
		{storeTool(), `{"title":"` + strings.Repeat("é", 201) + `","body":"b"}`, false, false},
		{storeTool(), `{"title":"t","body":"` + strings.Repeat("x", 32001) + `"}`, false, false},
		{storeTool(), `{"title":"t","body":"b","tags":[` + strings.Repeat(`"a",`, 16) + `"a"]}`, false, false},
		{storeTool(), `{"title":"t","body":"b","tags":[""]}`, false, false},
		{storeTool(), `{"title":"t","body":"b","tags":["` + strings.Repeat("a", 65) + `"]}`, false, false},
		{storeTool(), `{"title":"t","body":"b","confidence":101}`, false, false},
		{storeTool(), `{"title":"t","body":"b","confidence":1.5}`, false, false},
		{storeTool(), `{"title":"t","body":"b","taskRef":{"taskId":"` + id + `","kind":"x"}}`, false, false},
		{storeTool(), `{"title":"t","body":"b","taskRef":{"taskId":"nope","kind":"produced"}}`, false, false},
		{storeTool(), `{"title":"t","body":"b","clientToken":"` + strings.ReplaceAll(id, "-", "") + `"}`, false, false},
		{storeTool(), `{"title":"t","body":"b","x":1}`, false, false},
		{storeTool(), `{"title":"t","body":"b","taskRef":{"taskId":"` + id + `","kind":"produced","x":1}}`, false, false},
		{storeTool(), `{"title":"  ","body":"b"}`, false, true},
		{storeTool(), `{"title":"t","body":"b","expiresAt":"2001-01-01T00:00:00Z"}`, false, true},
		{searchTool(), `{"query":"q","limit":50,"tags":["x"],"includeSuperseded":true,"includeExpired":false,"minScore":0.5,"efSearch":200}`, true, false},
		{searchTool(), `{}`, false, false},
		{searchTool(), `{"query":"q","limit":0}`, false, false},
		{searchTool(), `{"query":"q","minScore":-0.1}`, false, false},
		{searchTool(), `{"query":"q","efSearch":0}`, false, false},
		{searchTool(), `{"query":"` + strings.Repeat("q", 2001) + `"}`, false, false},
		{supersedeTool(), `{"oldId":"` + id + `","newId":"` + id2 + `"}`, true, false},
		{supersedeTool(), `{"oldId":"` + id + `"}`, false, false},
		{supersedeTool(), `{"oldId":"` + id + `","newId":"` + id + `"}`, false, true},
	}
	for _, c := range cases {
		s := c.tool.InputSchema.(*jsonschema.Schema)
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		var inst map[string]any
		if err := json.Unmarshal([]byte(c.args), &inst); err != nil {
			t.Fatal(err)
		}
		schemaOK := rs.Validate(inst) == nil
		edgeOK := edgeAccepts(c.tool.Name, json.RawMessage(c.args))
		wantSchema := c.valid || c.edgeOnly
		if schemaOK != wantSchema || edgeOK != c.valid {
			t.Errorf("%s %.80s: schema accepts %v (want %v), edge accepts %v (want %v)", c.tool.Name, c.args, schemaOK, wantSchema, edgeOK, c.valid)
		}
	}
}

func edgeAccepts(tool string, raw json.RawMessage) bool {
	var err error
	switch tool {
	case ToolStore:
		var a *StoreArgs
		if a, err = decodeArgs[StoreArgs](raw, storeTool().InputSchema.(*jsonschema.Schema)); err == nil {
			err = a.check()
		}
	case ToolSearch:
		var a *SearchArgs
		if a, err = decodeArgs[SearchArgs](raw, searchTool().InputSchema.(*jsonschema.Schema)); err == nil {
			err = a.check()
		}
	case ToolSupersede:
		var a *SupersedeArgs
		if a, err = decodeArgs[SupersedeArgs](raw, supersedeTool().InputSchema.(*jsonschema.Schema)); err == nil {
			err = a.check()
		}
	}
	return err == nil
}
