package docsplit

import (
	"fmt"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
)

// FromHTML turns an HTML document into the Markdown Split reads, with
// github.com/JohannesKaufmann/html-to-markdown (golang.org/x/net/html's
// parser, the browsers' algorithm): <h1>..<h6> become ATX headings, so
// an HTML document is cut where its author put headings; lists, code
// blocks, links and tables keep their shape; <script>, <style> and other
// content a reader never sees are dropped; text that would read as
// Markdown ("# not a heading" in a paragraph) is escaped, so it starts no
// section. Its cost is about 28 times the input's size in allocations (a
// 1 MiB page: 29 MB and 126,000 allocations, BenchmarkFromHTML), which is
// why a caller bounds the input first.
//
// It fails only where the parser does: elements nested deeper than 512.
func FromHTML(html string) (string, error) {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
	))
	md, err := conv.ConvertString(html)
	if err != nil {
		return "", fmt.Errorf("html to markdown: %w", err)
	}
	return md, nil
}
