// Package after hands the work a call's answer need not wait for (the
// record of a store's answer for its retries, the embeddings queue's
// hand-over of a committed entry) to whatever runs it after the answer:
// the caller's edge puts a runner in the context (With; the MCP server's
// is its queue of work after the answers), and without one the work runs
// at once, so a Go caller finds it done when the call returns.
package after

import "context"

type key struct{}

// Runner runs f after the call's answer with ctx (the call's, without its
// cancellation), or with a context of its own derived from it.
type Runner func(ctx context.Context, f func(ctx context.Context))

// With returns ctx whose calls hand their after-the-answer work to run.
func With(ctx context.Context, run Runner) context.Context {
	return context.WithValue(ctx, key{}, run)
}

// Run runs f after the answer when ctx carries a Runner, else now. f gets a
// context without ctx's cancellation (the call's context ends with its
// answer) and must bound its own waits.
func Run(ctx context.Context, f func(ctx context.Context)) {
	bg := context.WithoutCancel(ctx)
	if run, ok := ctx.Value(key{}).(Runner); ok && run != nil {
		run(bg, f)
		return
	}
	f(bg)
}
