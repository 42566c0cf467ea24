package knowledge

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// TestSchemasStateTheDomainsLimits pins the limits tools/list advertises,
// and the descriptions that state them, to the domain's constants: the
// domain alone checks the arguments, and the schema tells clients the same
// rules.
func TestSchemasStateTheDomainsLimits(t *testing.T) {
	prop := func(tool *mcp.Tool, path ...string) *jsonschema.Schema {
		s := tool.InputSchema.(*jsonschema.Schema)
		for _, p := range path {
			if p == "[]" {
				s = s.Items
				continue
			}
			s = s.Properties[p]
		}
		return s
	}
	num := func(f *float64) int {
		if f == nil {
			return -1
		}
		return int(*f)
	}
	val := func(i *int) int {
		if i == nil {
			return -1
		}
		return *i
	}
	def := func(s *jsonschema.Schema) int {
		n, err := strconv.Atoi(string(s.Default))
		if err != nil {
			return -1
		}
		return n
	}
	store, search, list, supersede := storeTool(), searchTool(), listTool(), supersedeTool()
	link, forget, relations := linkTool(), forgetTool(), relationsTool()
	upStart, upAppend := uploadStartTool(), uploadAppendTool()
	cases := []struct {
		what      string
		got, want int
	}{
		{"store title maxLength", val(prop(store, "title").MaxLength), domain.MaxTitleChars},
		{"store body maxLength", val(prop(store, "body").MaxLength), domain.MaxBodyChars},
		{"store tags maxItems", val(prop(store, "tags").MaxItems), domain.MaxTags},
		{"store tag maxLength", val(prop(store, "tags", "[]").MaxLength), domain.MaxTagChars},
		{"store confidence minimum", num(prop(store, "confidence").Minimum), domain.MinConfidence},
		{"store confidence maximum", num(prop(store, "confidence").Maximum), domain.MaxConfidence},
		{"store confidence default", def(prop(store, "confidence")), domain.DefaultConf},
		{"replacement title maxLength", val(prop(supersede, "replacement", "title").MaxLength), domain.MaxTitleChars},
		{"replacement confidence default", def(prop(supersede, "replacement", "confidence")), domain.DefaultConf},
		{"search query maxLength", val(prop(search, "query").MaxLength), domain.MaxQueryChars},
		{"search limit maximum", num(prop(search, "limit").Maximum), domain.MaxLimit},
		{"search limit default", def(prop(search, "limit")), domain.DefaultLimit},
		{"search tags maxItems", val(prop(search, "tags").MaxItems), domain.MaxTags},
		{"search efSearch maximum", num(prop(search, "efSearch").Maximum), domain.MaxEfSearch},
		{"search efSearch default", def(prop(search, "efSearch")), domain.DefaultEfSearch},
		{"search maxTokens minimum", num(prop(search, "maxTokens").Minimum), domain.MinMaxTokens},
		{"search maxTokens maximum", num(prop(search, "maxTokens").Maximum), domain.MaxMaxTokens},
		{"search hops maximum", num(prop(search, "hops").Maximum), domain.MaxHops},
		{"search relationTypes maxItems", val(prop(search, "relationTypes").MaxItems), domain.MaxRelationTypes},
		{"search relation type maxLength", val(prop(search, "relationTypes", "[]").MaxLength), domain.MaxRelationTypeChars},
		{"list limit maximum", num(prop(list, "limit").Maximum), domain.MaxListLimit},
		{"list limit default", def(prop(list, "limit")), domain.DefaultListLimit},
		{"list maxTokens maximum", num(prop(list, "maxTokens").Maximum), domain.MaxMaxTokens},
		{"link note maxLength", val(prop(link, "note").MaxLength), domain.MaxRelationNote},
		{"link type minLength", val(prop(link, "type").MinLength), domain.MinRelationTypeChars},
		{"forget reason maxLength", val(prop(forget, "reason").MaxLength), domain.MaxForgetReason},
		{"relations limit maximum", num(prop(relations, "limit").Maximum), domain.MaxRelationsLimit},
		{"relations limit default", def(prop(relations, "limit")), domain.DefaultRelationsLimit},
		{"relations types maxItems", val(prop(relations, "types").MaxItems), domain.MaxRelationTypes},
		{"upload start title maxLength", val(prop(upStart, "title").MaxLength), domain.MaxTitleChars},
		{"upload start totalBytes maximum", num(prop(upStart, "totalBytes").Maximum), domain.MaxUploadBytes},
		{"upload start tags maxItems", val(prop(upStart, "tags").MaxItems), domain.MaxTags},
		{"upload start source maxLength", val(prop(upStart, "source").MaxLength), domain.MaxSourceChars},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	says := []struct {
		what, text string
		limits     []int
	}{
		{"store title", prop(store, "title").Description, []int{domain.MaxTitleChars}},
		{"store body", prop(store, "body").Description, []int{domain.MaxBodyChars}},
		{"store tags", prop(store, "tags").Description, []int{domain.MaxTags}},
		{"store confidence", prop(store, "confidence").Description, []int{domain.MinConfidence, domain.MaxConfidence, domain.DefaultConf}},
		{"search limit", prop(search, "limit").Description, []int{domain.MaxLimit, domain.DefaultLimit}},
		{"search efSearch", prop(search, "efSearch").Description, []int{domain.MaxEfSearch, domain.DefaultEfSearch}},
		{"search maxTokens", prop(search, "maxTokens").Description, []int{domain.MinMaxTokens, domain.MaxMaxTokens}},
		{"list limit", prop(list, "limit").Description, []int{domain.MaxListLimit, domain.DefaultListLimit}},
		{"link note", prop(link, "note").Description, []int{domain.MaxRelationNote}},
		{"forget", forget.Description, []int{domain.MaxForgetReason}},
		{"upload start totalBytes", prop(upStart, "totalBytes").Description, []int{domain.MaxUploadBytes}},
		{"upload start", upStart.Description, []int{domain.MaxUploadBytes}},
		{"upload append content", prop(upAppend, "content").Description, []int{domain.MaxUploadPartBytes}},
	}
	for _, s := range says {
		for _, n := range s.limits {
			if !strings.Contains(s.text, strconv.Itoa(n)) {
				t.Errorf("%s's description does not state %d: %q", s.what, n, s.text)
			}
		}
	}
}

// TestSchemasAcceptValidArguments: arguments the domain takes pass the
// advertised schema as a client validates it (jsonschema-go), so a client
// that checks before calling is never stopped by a wrong limit.
func TestSchemasAcceptValidArguments(t *testing.T) {
	id, id2 := uuid.NewString(), uuid.NewString()
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	cases := []struct {
		tool *mcp.Tool
		args string
	}{
		{storeTool(), `{"title":"t","body":"b"}`},
		{storeTool(), `{"title":"` + strings.Repeat("é", domain.MaxTitleChars) + `","body":"b","tags":["A-b","c"],"confidence":0,"expiresAt":"` + future + `","taskRef":{"taskId":"` + id + `","kind":"references"},"clientToken":"` + id2 + `","ifSimilar":"skip"}`},
		{searchTool(), `{"query":"q","limit":50,"tags":["x"],"includeSuperseded":true,"includeExpired":false,"minScore":0.5,"efSearch":200,"maxTokens":100,"hops":2,"relationTypes":["FIXED_BY"]}`},
		{supersedeTool(), `{"oldId":"` + id + `","newId":"` + id2 + `"}`},
		{supersedeTool(), `{"oldId":"` + id + `","replacement":{"title":"t","body":"b","confidence":100},"clientToken":"` + id2 + `"}`},
		{listTool(), `{"limit":100,"maxTokens":1000000,"authorAgentId":"` + id + `"}`},
		{linkTool(), `{"fromId":"` + id + `","toId":"` + id2 + `","type":"DEPENDS_ON","note":"n"}`},
		{relationsTool(), `{"id":"` + id + `","direction":"in","types":["FIXES"],"limit":1}`},
		{uploadStartTool(), `{"title":"t","totalBytes":` + strconv.Itoa(domain.MaxUploadBytes) + `,"source":"s","tags":["a"],"kind":"procedural","metadata":{"env":"prod","n":1,"ok":true},"format":"text"}`},
		{uploadAppendTool(), `{"uploadId":"` + id + `","index":0,"content":"x"}`},
		{uploadFinishTool(), `{"uploadId":"` + id + `","clientToken":"` + id2 + `"}`},
	}
	for _, c := range cases {
		rs, err := c.tool.InputSchema.(*jsonschema.Schema).Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		var inst map[string]any
		if err := json.Unmarshal([]byte(c.args), &inst); err != nil {
			t.Fatal(err)
		}
		if err := rs.Validate(inst); err != nil {
			t.Errorf("%s %.80s: %v", c.tool.Name, c.args, err)
		}
	}
}
