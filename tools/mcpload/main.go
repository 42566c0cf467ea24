// Command mcpload is the load of the cluster smoke's end-to-end run
// (scripts/cluster-smoke.sh, SMOKE_LOAD=go) in one process: c clients at
// once, client k storing n entries into orgs k, k+c, k+2c... in turn, each
// store followed by a search of that org, over MCP's HTTP transport with
// keep-alive connections. It prints one line per call, "tool status
// seconds", as the script's bash clients do, and the calls that failed to
// the -errors file.
//
// Why beside the bash clients: they start curl and a handful of shells per
// call, about half of the two cores of the box in a 64-client run
// (docs/benchmarks.md, "Cluster"), which the servers under test then do
// not have; a comparison of two deployments under that load measures the
// load generator as much as them.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpload:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "", "the MCP endpoint, http://host:port/mcp")
	tokensFile := flag.String("tokens", "", "a file of bearer tokens, one an org, one a line")
	clients := flag.Int("clients", 64, "clients at once")
	n := flag.Int("n", 16, "stores (each followed by a search) per client")
	runID := flag.String("run", "", "the run's name, in the entries' titles")
	round := flag.Int("round", 1, "the round, in the entries' titles")
	errorsFile := flag.String("errors", "", "where the failed calls are written (default stderr)")
	timeout := flag.Duration("timeout", 30*time.Second, "deadline of one call")
	flag.Parse()
	if *url == "" || *tokensFile == "" || *clients < 1 || *n < 1 {
		return fmt.Errorf("-url and -tokens are required, -clients and -n at least 1")
	}
	raw, err := os.ReadFile(*tokensFile)
	if err != nil {
		return err
	}
	tokens := strings.Fields(string(raw))
	if len(tokens) == 0 {
		return fmt.Errorf("%s holds no token", *tokensFile)
	}
	errOut := io.Writer(os.Stderr)
	if *errorsFile != "" {
		f, err := os.Create(*errorsFile)
		if err != nil {
			return err
		}
		defer f.Close()
		errOut = f
	}
	hc := &http.Client{
		Timeout:   *timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: *clients},
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := 1; k <= *clients; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 1; j <= *n; j++ {
				tok := tokens[(k-1+(j-1)**clients)%len(tokens)]
				for _, tool := range []string{"store_knowledge", "search_knowledge"} {
					var args map[string]any
					if tool == "store_knowledge" {
						args = map[string]any{
							"title": fmt.Sprintf("E2E %s client %d entry %d round %d", *runID, k, j, *round),
							"body":  fmt.Sprintf("Client %d stores entry %d of run %s, round %d, beside every other org at once.", k, j, *runID, *round),
						}
					} else {
						args = map[string]any{"query": fmt.Sprintf("client %d entry %d run %s round %d", k, j, *runID, *round), "limit": 5}
					}
					secs, failure := call(hc, *url, tok, tool, args)
					mu.Lock()
					status := "ok"
					if failure != "" {
						status = "error"
						fmt.Fprintf(errOut, "%s client %d: %s\n", tool, k, failure)
					}
					fmt.Fprintf(out, "%s %s %.6f\n", tool, status, secs)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// call sends one tools/call and says how long it took and, when it failed
// (a transport error, a status other than 200, an answer marked isError),
// why.
func call(hc *http.Client, url, token, tool string, args map[string]any) (float64, string) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return time.Since(start).Seconds(), err.Error()
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	secs := time.Since(start).Seconds()
	switch {
	case err != nil:
		return secs, err.Error()
	case resp.StatusCode != http.StatusOK:
		return secs, fmt.Sprintf("HTTP %d: %.400s", resp.StatusCode, answer)
	case bytes.Contains(answer, []byte(`"isError":true`)):
		return secs, fmt.Sprintf("%.400s", answer)
	}
	return secs, ""
}
