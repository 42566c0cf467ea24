package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// protocolVersion is the MCP version the clients speak.
const protocolVersion = "2025-11-25"

// client calls one server's tools. Its calls are plain JSON-RPC, encoded
// and decoded as little as it can, so that what it times is the server's.
type client interface {
	// call calls a tool and returns its result's text (an error for a
	// JSON-RPC error or a tool error).
	call(name string, args any) (json.RawMessage, error)
	close() error
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func request(id int, method string, params any) ([]byte, error) {
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

func initParams() map[string]any {
	return map[string]any{"protocolVersion": protocolVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "mcpbench", "version": "1"}}
}

// result checks a tools/call response.
func toolResult(b []byte) (json.RawMessage, error) {
	var r rpcResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("response %q: %w", truncate(b), err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("json-rpc error %d: %s", r.Error.Code, r.Error.Message)
	}
	if bytes.Contains(r.Result, []byte(`"isError":true`)) {
		return nil, fmt.Errorf("tool error: %s", truncate(r.Result))
	}
	return r.Result, nil
}

func truncate(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

// stdioClient runs `mcp --stdio` and speaks JSON lines over its stdin and
// stdout, as an agent's MCP client does.
type stdioClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startStdio(bin string, env []string, logFile *os.File) (*stdioClient, error) {
	cmd := exec.Command(bin, "--stdio")
	cmd.Env = env
	cmd.Stderr = logFile
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &stdioClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	if _, err := c.rpc("initialize", initParams()); err != nil {
		c.close()
		return nil, fmt.Errorf("initialize: %w (see %s)", err, logFile.Name())
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *stdioClient) rpc(method string, params any) ([]byte, error) {
	c.id++
	b, err := request(c.id, method, params)
	if err != nil {
		return nil, err
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		// Notifications (logging, progress) have no id: skip them.
		if bytes.Contains(line, []byte(`"id":`)) {
			return line, nil
		}
	}
}

func (c *stdioClient) call(name string, args any) (json.RawMessage, error) {
	b, err := c.rpc("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	return toolResult(b)
}

func (c *stdioClient) close() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		return errors.New("stdio server did not stop within 15 s of stdin's close")
	}
}

// httpClient runs the server on a loopback port and POSTs each call to
// /mcp (Streamable HTTP, stateless, JSON answers) on a kept-alive
// connection.
type httpClient struct {
	cmd      *exec.Cmd
	endpoint string
	token    string
	hc       *http.Client
	id       int
}

func startHTTP(bin string, env []string, token string, logFile *os.File) (*httpClient, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(env, "MCP_ADDR=127.0.0.1:0")
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(out)
	endpoint := ""
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "mcp: serving "); ok {
			endpoint = strings.TrimSpace(u)
			break
		}
	}
	go io.Copy(io.Discard, out)
	if endpoint == "" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the HTTP server did not say where it serves (see %s)", logFile.Name())
	}
	c := &httpClient{cmd: cmd, endpoint: endpoint, token: token, hc: &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true},
	}}
	if _, err := c.post("initialize", initParams()); err != nil {
		c.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return c, nil
}

func (c *httpClient) post(method string, params any) ([]byte, error) {
	c.id++
	b, err := request(c.id, method, params)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, c.endpoint, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", res.StatusCode, truncate(body))
	}
	return body, nil
}

func (c *httpClient) call(name string, args any) (json.RawMessage, error) {
	b, err := c.post("tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	return toolResult(b)
}

func (c *httpClient) close() error {
	c.hc.CloseIdleConnections()
	c.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		return errors.New("HTTP server did not stop within 30 s of SIGINT")
	}
}
