package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	// stdioWorkers is how many tools/call requests mcp-go's stdio transport
	// runs at once (its default is 5; 100 is the most it accepts).
	stdioWorkers = 100
	// stdioQueue is how many further tools/call requests may wait for a
	// worker. When this queue is full mcp-go runs the call on its read loop,
	// which stalls reading, so keep it generous.
	stdioQueue = 10000
	// maxBigBytes bounds the big tool so a typo cannot exhaust memory.
	maxBigBytes = 256 << 20
)

// activeSDKServers counts mcp-go backed servers running in this process.
// mcp-go's stdio transport keeps its session (and its notification queue) in
// a package-level variable, so two such servers in one process share it and
// notifications may reach the wrong client.
var activeSDKServers atomic.Int32

// serveSDK serves an mcp-go server over in/out until in reaches EOF or ctx
// ends.
func serveSDK(ctx context.Context, name string, s *server.MCPServer, in io.Reader, out io.Writer, errOut io.Writer) error {
	if activeSDKServers.Add(1) > 1 {
		fmt.Fprintf(errOut, "%s: warning: another mcp-go stdio server is running in this process; notifications may be misrouted\n", name)
	}
	defer activeSDKServers.Add(-1)

	logger := log.New(errOut, name+": ", 0)
	stdio := server.NewStdioServer(s)
	for _, opt := range []server.StdioOption{
		server.WithErrorLogger(logger),
		server.WithWorkerPoolSize(stdioWorkers),
		server.WithQueueSize(stdioQueue),
	} {
		opt(stdio)
	}
	return stdio.Listen(ctx, in, out)
}

// runTools serves the stateless demo tools. "--env NAME,..." limits the env
// tool to those variables: the built-in demo config passes the ones it sets,
// so that no client can read the host's variables through it. "--mutable"
// adds hide_tool and show_tool, which take a tool out of the list and put it
// back at run time, each followed by notifications/tools/list_changed.
func runTools(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	var visible []string
	mutable := false
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--env" && i+1 < len(args) && visible == nil:
			visible = strings.Split(args[i+1], ",")
			i++
		case args[i] == "--mutable" && !mutable:
			mutable = true
		default:
			return fmt.Errorf("demo: tools takes no arguments but --env NAME,... and --mutable, got %q", args)
		}
	}
	tracked := &notificationOut{w: out, changed: make(chan struct{})}
	s := newToolsServer(errOut, tracked, visible)
	if mutable {
		addToggleTools(s)
	}
	return serveSDK(ctx, "demo-tools", s, in, tracked, errOut)
}

// addToggleTools adds hide_tool, which takes one of s's tools out of its
// list, and show_tool, which puts a hidden one back; mcp-go sends
// notifications/tools/list_changed after each change.
func addToggleTools(s *server.MCPServer) {
	var (
		mu     sync.Mutex
		hidden = map[string]server.ServerTool{}
	)
	nameArg := mcp.WithString("name", mcp.Required(), mcp.Description("Tool name."))
	s.AddTool(mcp.NewTool("hide_tool",
		mcp.WithDescription("Takes the named tool out of this server's tool list until show_tool puts it back."),
		nameArg,
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := req.RequireString("name")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if name == "hide_tool" || name == "show_tool" {
			return mcp.NewToolResultErrorf("%s cannot be hidden", name), nil
		}
		mu.Lock()
		defer mu.Unlock()
		tool := s.GetTool(name)
		if tool == nil {
			return mcp.NewToolResultErrorf("no tool %q is listed", name), nil
		}
		hidden[name] = *tool
		s.DeleteTools(name)
		return mcp.NewToolResultText("hid " + name), nil
	})
	s.AddTool(mcp.NewTool("show_tool",
		mcp.WithDescription("Puts a tool hide_tool took out back into this server's tool list."),
		nameArg,
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := req.RequireString("name")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		mu.Lock()
		defer mu.Unlock()
		tool, ok := hidden[name]
		if !ok {
			return mcp.NewToolResultErrorf("no tool %q is hidden", name), nil
		}
		delete(hidden, name)
		s.AddTools(tool)
		return mcp.NewToolResultText("showed " + name), nil
	})
}

func runCounter(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("demo: counter takes no arguments, got %q", args)
	}
	return serveSDK(ctx, "demo-counter", newCounterServer(), in, out, errOut)
}

// newToolsServer builds the demo tools; visible, when not nil, lists the only
// variables the env tool reports.
func newToolsServer(errOut io.Writer, notes *notificationOut, visible []string) *server.MCPServer {
	s := server.NewMCPServer("demo-tools", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithInstructions("Demo tools served by mcp-aggregator: echo, add, pid, big, slow, fail, env."),
	)

	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns its text argument unchanged."),
		mcp.WithString("text", mcp.Required(), mcp.Description("Text to return.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(text), nil
	})

	s.AddTool(mcp.NewTool("add",
		mcp.WithDescription("Adds two numbers."),
		mcp.WithNumber("a", mcp.Required(), mcp.Description("First addend.")),
		mcp.WithNumber("b", mcp.Required(), mcp.Description("Second addend.")),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`)),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := req.RequireFloat("a")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		b, err := req.RequireFloat("b")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		sum := a + b
		return mcp.NewToolResultStructured(map[string]any{"sum": sum}, strconv.FormatFloat(sum, 'f', -1, 64)), nil
	})

	s.AddTool(pidTool())

	s.AddTool(mcp.NewTool("big",
		mcp.WithDescription("Returns one text content of exactly the requested number of bytes, repeating \"0123456789abcdef\"."),
		mcp.WithInteger("bytes", mcp.Required(), mcp.Min(0), mcp.Max(maxBigBytes), mcp.Description("Length of the text in bytes.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n, err := req.RequireInt("bytes")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if n < 0 || n > maxBigBytes {
			return mcp.NewToolResultErrorf("bytes must be between 0 and %d, got %d", maxBigBytes, n), nil
		}
		return mcp.NewToolResultText(pattern(n)), nil
	})

	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Takes the given number of seconds, reporting progress in steps. Honours cancellation."),
		mcp.WithNumber("seconds", mcp.Required(), mcp.Min(0), mcp.Description("Total duration in seconds.")),
		mcp.WithInteger("steps", mcp.DefaultNumber(10), mcp.Min(0), mcp.Description("Number of progress steps.")),
		mcp.WithString("marker", mcp.Description("File to create, containing \"cancelled\", if the call is cancelled.")),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return slow(ctx, req, errOut, notes)
	})

	s.AddTool(mcp.NewTool("fail",
		mcp.WithDescription("Returns a tool error (isError=true) carrying the given message."),
		mcp.WithString("message", mcp.Required(), mcp.Description("Error text.")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError(req.GetString("message", "")), nil
	})

	s.AddTool(mcp.NewTool("env",
		mcp.WithDescription("Returns the value of an environment variable of the server process (empty when unset); when started with --env, only of the variables named there."),
		mcp.WithString("name", mcp.Required(), mcp.Description("Variable name.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := req.RequireString("name")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if visible != nil && !slices.Contains(visible, name) {
			return mcp.NewToolResultErrorf("%s is not one of the variables this demo server may report (%s)", name, strings.Join(visible, ", ")), nil
		}
		return mcp.NewToolResultText(os.Getenv(name)), nil
	})

	return s
}

// slow waits for the requested duration in steps, sending a progress
// notification after each one when the request asked for progress.
func slow(ctx context.Context, req mcp.CallToolRequest, errOut io.Writer, notes *notificationOut) (*mcp.CallToolResult, error) {
	seconds, err := req.RequireFloat("seconds")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if seconds < 0 {
		return mcp.NewToolResultError("seconds must not be negative"), nil
	}
	steps := req.GetInt("steps", 10)
	if steps < 0 {
		return mcp.NewToolResultError("steps must not be negative"), nil
	}
	marker := req.GetString("marker", "")

	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)

	total := time.Duration(seconds * float64(time.Second))
	intervals := max(steps, 1)
	timer := time.NewTimer(total / time.Duration(intervals))
	defer timer.Stop()
	for i := 1; i <= intervals; i++ {
		select {
		case <-ctx.Done():
			fmt.Fprintln(errOut, "slow: cancelled")
			if marker != "" {
				// Written whole under another name, then renamed: a test that
				// waits for the file must never read it half written.
				if err := writeAtomically(marker, []byte("cancelled")); err != nil {
					fmt.Fprintf(errOut, "slow: writing marker: %v\n", err)
				}
			}
			return nil, ctx.Err()
		case <-timer.C:
		}
		if i < intervals {
			timer.Reset(total*time.Duration(i+1)/time.Duration(intervals) - total*time.Duration(i)/time.Duration(intervals))
		}
		if token != nil && steps > 0 && srv != nil {
			notes.sent.Add(1)
			err := srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": token,
				"progress":      i,
				"total":         steps,
				"message":       fmt.Sprintf("step %d of %d", i, steps),
			})
			if err != nil {
				notes.sent.Add(^uint64(0))
				fmt.Fprintf(errOut, "slow: sending progress: %v\n", err)
			}
		}
	}
	notes.waitWritten(ctx)
	return mcp.NewToolResultText(fmt.Sprintf("done after %d steps", steps)), nil
}

func pidTool() (mcp.Tool, server.ToolHandlerFunc) {
	return mcp.NewTool("pid",
			mcp.WithDescription("Returns the server's process id."),
			mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"pid":{"type":"integer"}},"required":["pid"]}`)),
			mcp.WithReadOnlyHintAnnotation(true),
		), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			pid := os.Getpid()
			return mcp.NewToolResultStructured(map[string]any{"pid": pid}, strconv.Itoa(pid)), nil
		}
}

func newCounterServer() *server.MCPServer {
	s := server.NewMCPServer("demo-counter", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithInstructions("A counter that lives as long as this server process."),
	)
	var value atomic.Int64
	valueSchema := json.RawMessage(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)
	valueResult := func(v int64) *mcp.CallToolResult {
		return mcp.NewToolResultStructured(map[string]any{"value": v}, strconv.FormatInt(v, 10))
	}

	s.AddTool(mcp.NewTool("increment",
		mcp.WithDescription("Adds to the counter and returns the new value."),
		mcp.WithInteger("by", mcp.DefaultNumber(1), mcp.Description("Amount to add (may be negative).")),
		mcp.WithRawOutputSchema(valueSchema),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return valueResult(value.Add(int64(req.GetInt("by", 1)))), nil
	})

	s.AddTool(mcp.NewTool("get",
		mcp.WithDescription("Returns the counter's current value."),
		mcp.WithRawOutputSchema(valueSchema),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return valueResult(value.Load()), nil
	})

	s.AddTool(pidTool())
	return s
}

// notificationOut is the stdout of the tools server. mcp-go writes
// notifications from a goroutine of their own, so without help the last
// progress notification of a call can trail its response, and clients
// rightly drop progress for finished requests. It counts the notifications
// written so that a handler can wait for its own to go out before it
// returns.
type notificationOut struct {
	w    io.Writer
	sent atomic.Uint64 // notifications handed to mcp-go

	mu      sync.Mutex
	written uint64        // notification lines written
	changed chan struct{} // closed and replaced whenever written grows
}

// notificationPrefix starts every notification mcp-go writes (it marshals
// a struct, so the key order is fixed) and no response or request.
var notificationPrefix = []byte(`{"jsonrpc":"2.0","method":`)

// Write is called by mcp-go once per whole line.
func (o *notificationOut) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err == nil && bytes.HasPrefix(p, notificationPrefix) {
		o.mu.Lock()
		o.written++
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	}
	return n, err
}

// waitWritten waits until every notification sent so far has been written,
// ctx ends, or a generous bound passes (a broken stdout must not wedge a
// handler).
func (o *notificationOut) waitWritten(ctx context.Context) {
	target := o.sent.Load()
	bound := time.NewTimer(5 * time.Second)
	defer bound.Stop()
	for {
		o.mu.Lock()
		written, changed := o.written, o.changed
		o.mu.Unlock()
		if written >= target {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-bound.C:
			return
		}
	}
}

// writeAtomically writes data to path so that readers see either nothing or
// all of it.
func writeAtomically(path string, data []byte) error {
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
