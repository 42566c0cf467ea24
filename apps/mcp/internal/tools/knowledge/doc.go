// Package knowledge exposes the knowledge domain to agents as MCP tools
// (store_knowledge, search_knowledge, supersede_knowledge, get_knowledge,
// list_knowledge, forget_knowledge, link_knowledge, unlink_knowledge,
// list_relations: the Tool* constants), resources (knowledge://{id},
// knowledge://tasks/{taskId}, knowledge://stats) and argument completions.
//
// It is the edge: arguments arrive as untrusted JSON, are decoded strictly
// (unknown properties refused, JSON types, valid UTF-8) and converted to
// typed values (UUIDs, RFC 3339 times, an explicit zero kept apart from an
// argument not given); every rule on the values is the domain's, which also
// owns the constants the input schemas advertise. Every refusal, the edge's
// or the domain's, is a tool error whose text and structured content carry a
// stable code, the argument at fault and the rule it broke, so an agent can
// correct its call.
//
// The caller (org and agent) is never an argument: it comes from the
// verified token the server put in the context (see internal/authn).
package knowledge
