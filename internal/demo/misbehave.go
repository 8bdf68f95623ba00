package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hugeLineBytes is the length of ping_tool's text in the huge-line modes,
// and of the stderr line in long-stderr-line mode.
const hugeLineBytes = 8 << 20

// misbehaveModes lists the modes of the misbehave server with a short
// description of each.
var misbehaveModes = map[string]string{
	"noise":              "writes non-JSON lines and a truncated JSON line before every response",
	"unknown-id":         "sends a response with an id nobody asked for before every response",
	"hang-init":          "never answers initialize",
	"exit-init":          "exits with status 3 on initialize",
	"huge-line":          "ping_tool returns 8 MiB of text on one line",
	"huge-line-id-last":  "ping_tool returns 8 MiB of text on one line whose id comes last, as JavaScript servers write it",
	"long-stderr-line":   "writes one 8 MiB line to stderr at start, then the line \"long line written\"",
	"ping-flood":         "ping-flood N: every tools/call first sends N ping requests, without reading stdin meanwhile",
	"ignore-term":        "ignores SIGTERM, SIGINT and stdin EOF, and starts a grandchild that does too",
	"crash-after":        "crash-after N: exits with status 1 on the Nth tools/call, without answering it",
	"sleeper":            "ignores SIGTERM and SIGINT and sleeps; started by ignore-term",
	"flood":              "floods notifications/tools/list_changed or big progress on request; see floodServer",
	"slow-relist":        "every tools/call first sends notifications/tools/list_changed; every tools/list after the first is never answered",
	"bom":                "writes a UTF-8 byte order mark before its first line on stdout",
	"init-version":       "init-version V: answers initialize with protocolVersion V, whatever was asked",
	"null-result":        "answers tools/call with \"result\": null",
	"array-result":       "answers tools/call with a result that is an array",
	"bad-error":          "answers tools/call with an error member that is a string, not an error object",
	"string-id":          "answers tools/call with its integer id written as a string",
	"cursor-cycle":       "tools/list pages never end: their nextCursor goes a, b, a, b, ...",
	"hang-setlevel":      "declares logging and never answers logging/setLevel",
	"bad-schemas":        "tools/list also lists no_schema, without an inputSchema, and array_schema, whose inputSchema has type array",
	"batch-answer":       "answers tools/call with a JSON-RPC batch: a notifications/message, then the response",
	"progress-backwards": "every tools/call with a progressToken first sends progress 1, 3, 2, 3, 4 for it: two of them do not increase",
	"bad-utf8":           "tools/list also lists latin1, whose description is Latin-1, not UTF-8, and ends in half a surrogate pair; ping_tool answers with such text too",
	"escapes":            "tools/list also lists clear, whose description holds terminal escape sequences and control characters, and a tool without an inputSchema named with one",
	"deep-result":        "ping_tool with {\"depth\": N} answers with structuredContent nested N arrays deep; without it, \"pong\"",
	"deaf-after-call":    "answers the first tools/call, then never reads stdin again: what is written to it fills the pipe and then waits",
}

func misbehaveModeNames() string {
	names := make([]string, 0, len(misbehaveModes))
	for name := range misbehaveModes {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

type misbehaveServer struct {
	ctx       context.Context
	mode      string
	conn      *lineConn
	errOut    io.Writer
	count     int    // the N of crash-after N and ping-flood N
	version   string // the V of init-version V
	calls     int
	unsolicit int
	lists     int // tools/list requests seen (slow-relist)
}

func runMisbehave(ctx context.Context, args []string, in io.Reader, out io.Writer, errOut io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("demo: misbehave needs a mode (one of %s)", misbehaveModeNames())
	}
	mode := args[0]
	if _, ok := misbehaveModes[mode]; !ok {
		return fmt.Errorf("demo: unknown misbehave mode %q (one of %s)", mode, misbehaveModeNames())
	}
	s := &misbehaveServer{ctx: ctx, mode: mode, conn: &lineConn{out: out}, errOut: errOut}
	switch mode {
	case "crash-after", "ping-flood":
		if len(args) != 2 {
			return fmt.Errorf("demo: misbehave %s needs a count, e.g. %s 3", mode, mode)
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			return fmt.Errorf("demo: misbehave %s: count must be a positive integer, got %q", mode, args[1])
		}
		s.count = n
	case "init-version":
		if len(args) != 2 {
			return fmt.Errorf("demo: misbehave init-version needs a protocol version, e.g. init-version 1999-01-01")
		}
		s.version = args[1]
	default:
		if len(args) != 1 {
			return fmt.Errorf("demo: misbehave %s takes no further arguments, got %q", mode, args[1:])
		}
	}

	switch mode {
	case "flood":
		return runFlood(ctx, in, out, errOut)
	case "sleeper":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		// Tell the parent the signals are ignored now: until then a SIGTERM
		// would still kill this process, which is not what it stands for.
		if os.Getenv(sleeperReadyVar) == "3" {
			ready := os.NewFile(3, "ready")
			_, _ = ready.Write([]byte{'r'})
			_ = ready.Close()
		}
		<-ctx.Done()
		return nil
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		child, err := startSleeper(out, errOut)
		if err != nil {
			return err
		}
		fmt.Fprintf(errOut, "pid %d child %d\n", os.Getpid(), child)
	case "long-stderr-line":
		if _, err := fmt.Fprintf(errOut, "%s\nlong line written\n", pattern(hugeLineBytes)); err != nil {
			return err
		}
	case "noise":
		s.conn.beforeResponse = func(w io.Writer) error {
			_, err := io.WriteString(w, "this is not json\n{\"jsonrpc\":\n")
			return err
		}
	case "bom":
		bom := true
		s.conn.beforeResponse = func(w io.Writer) error {
			if !bom {
				return nil
			}
			bom = false
			_, err := io.WriteString(w, "\uFEFF")
			return err
		}
	case "unknown-id":
		s.conn.beforeResponse = func(w io.Writer) error {
			s.unsolicit++
			_, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"unsolicited-%d","result":{"content":[{"type":"text","text":"nobody asked"}]}}`+"\n", s.unsolicit)
			return err
		}
	}

	err := serveLines(ctx, in, s.handle)
	if mode == "ignore-term" && err == nil {
		// Keep running after stdin closes, as a server that ignores EOF
		// would; only the context (or SIGKILL) ends it.
		<-ctx.Done()
	}
	return err
}

// sleeperReadyVar, set to "3", tells a sleeper to write a byte to file
// descriptor 3 once it ignores the signals.
const sleeperReadyVar = "MCP_AGGREGATOR_DEMO_SLEEPER_READY_FD"

// startSleeper starts "demo-server misbehave sleeper" from this executable,
// sharing our stdout and stderr when they are files so that, like a real
// stray grandchild, it keeps them open. It returns the child's pid once the
// child ignores SIGTERM and SIGINT (where it can tell: not on Windows).
func startSleeper(out, errOut io.Writer) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "demo-server", "misbehave", "sleeper")
	if f := fileOf(out); f != nil {
		cmd.Stdout = f
	}
	if f := fileOf(errOut); f != nil {
		cmd.Stderr = f
	}
	var ready *os.File
	if runtime.GOOS != "windows" {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, fmt.Errorf("demo: starting sleeper: %w", err)
		}
		defer r.Close()
		defer w.Close()
		cmd.ExtraFiles = []*os.File{w}
		cmd.Env = append(os.Environ(), sleeperReadyVar+"=3")
		ready = r
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("demo: starting sleeper: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it is ever killed
	if ready != nil {
		cmd.ExtraFiles[0].Close() // ours: only the child's end stays open
		_ = ready.SetReadDeadline(time.Now().Add(sleeperReadyTimeout))
		if _, err := ready.Read(make([]byte, 1)); err != nil {
			return 0, fmt.Errorf("demo: the sleeper never said it ignores signals: %w", err)
		}
	}
	return cmd.Process.Pid, nil
}

// sleeperReadyTimeout bounds the wait for a sleeper to start.
const sleeperReadyTimeout = 10 * time.Second

func (s *misbehaveServer) handle(line []byte) error {
	m, ok, err := decodeRequest(s.conn, line)
	if !ok {
		return err
	}
	switch m.Method {
	case "initialize":
		switch s.mode {
		case "hang-init":
			return nil
		case "exit-init":
			fmt.Fprintln(s.errOut, "exiting during initialize")
			exitProcess(3)
			return nil
		case "hang-setlevel":
			result, err := initializeResult(m.Params, "demo-misbehave")
			if err != nil {
				return s.conn.failCode(m.ID, codeInvalidParams, "invalid initialize params: "+err.Error())
			}
			result["capabilities"] = map[string]any{"tools": map[string]any{}, "logging": map[string]any{}}
			return s.conn.respondValue(m.ID, result)
		case "init-version":
			result, err := initializeResult(m.Params, "demo-misbehave")
			if err != nil {
				return s.conn.failCode(m.ID, codeInvalidParams, "invalid initialize params: "+err.Error())
			}
			result["protocolVersion"] = s.version
			return s.conn.respondValue(m.ID, result)
		}
		return s.conn.answerInitialize(m, "demo-misbehave")
	case "ping":
		return s.conn.respond(m.ID, json.RawMessage(`{}`))
	case "logging/setLevel":
		if s.mode != "hang-setlevel" {
			return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
		}
		fmt.Fprintln(s.errOut, "hang-setlevel: not answering logging/setLevel")
		return nil
	case "tools/list":
		s.lists++
		if s.mode == "slow-relist" && s.lists > 1 {
			fmt.Fprintln(s.errOut, "slow-relist: not answering tools/list")
			return nil
		}
		page := map[string]any{"tools": []any{noArgTool("ping_tool", `Returns "pong".`)}}
		if s.mode == "bad-schemas" {
			page["tools"] = append(page["tools"].([]any),
				map[string]any{"name": "no_schema", "description": "Has no inputSchema."},
				map[string]any{"name": "array_schema", "description": "Takes an array.", "inputSchema": map[string]any{"type": "array"}})
		}
		if s.mode == "bad-utf8" {
			result, err := marshal(map[string]any{"tools": append(page["tools"].([]any),
				map[string]any{"name": "latin1", "description": "LATIN1", "inputSchema": map[string]any{"type": "object"}})})
			if err != nil {
				return err
			}
			return s.conn.respond(m.ID, bytes.Replace(result, []byte("LATIN1"), []byte("caf\xe9 cr\xe8me \\ud83d"), 1))
		}
		if s.mode == "escapes" {
			page["tools"] = append(page["tools"].([]any), noArgTool("clear", "\x1b[2J\x1b]0;owned\x07Clears\tthe\u009bscreen\rfor you"),
				map[string]any{"name": "\x1b[31mred", "description": "Has no inputSchema, and a name that is an escape sequence."})
		}
		if s.mode == "cursor-cycle" {
			var p struct {
				Cursor string `json:"cursor"`
			}
			_ = json.Unmarshal(m.Params, &p)
			page["nextCursor"] = map[string]string{"": "a", "a": "b", "b": "a"}[p.Cursor]
		}
		return s.conn.respondValue(m.ID, page)
	case "tools/call":
		s.calls++
		if s.mode == "crash-after" && s.calls == s.count {
			fmt.Fprintf(s.errOut, "crashing on tools/call number %d\n", s.calls)
			exitProcess(1)
			return nil
		}
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Depth int `json:"depth"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return s.conn.failCode(m.ID, codeInvalidParams, "invalid tools/call params: "+err.Error())
		}
		if p.Name != "ping_tool" {
			return s.conn.failCode(m.ID, codeInvalidParams, "unknown tool: "+p.Name)
		}
		switch s.mode {
		case "huge-line":
			return s.conn.respondValue(m.ID, textResult(pattern(hugeLineBytes)))
		case "huge-line-id-last":
			result, err := marshal(textResult(pattern(hugeLineBytes)))
			if err != nil {
				return err
			}
			line := append([]byte(`{"result":`), result...)
			line = append(append(append(line, `,"jsonrpc":"2.0","id":`...), m.ID...), "}\n"...)
			return s.conn.write(line, true)
		case "ping-flood":
			if err := s.pingFlood(); err != nil {
				return err
			}
		case "null-result":
			return s.conn.respond(m.ID, json.RawMessage(`null`))
		case "array-result":
			return s.conn.respond(m.ID, json.RawMessage(`[{"type":"text","text":"pong"}]`))
		case "bad-error":
			line := append(append([]byte(`{"jsonrpc":"2.0","id":`), m.ID...), `,"error":"boom"}`+"\n"...)
			return s.conn.write(line, true)
		case "batch-answer":
			result, err := marshal(textResult("pong"))
			if err != nil {
				return err
			}
			line := []byte(`[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"batched"}},{"jsonrpc":"2.0","id":`)
			line = append(append(append(append(line, m.ID...), `,"result":`...), result...), "}]\n"...)
			return s.conn.write(line, true)
		case "string-id":
			id, err := marshal(string(m.ID))
			if err != nil {
				return err
			}
			return s.conn.respondValue(id, textResult("pong"))
		case "slow-relist":
			if err := s.conn.write([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n"), false); err != nil {
				return err
			}
		case "progress-backwards":
			if err := s.progressBackwards(m.Params); err != nil {
				return err
			}
		case "bad-utf8":
			return s.conn.respond(m.ID, json.RawMessage(`{"content":[{"type":"text","text":"caf`+"\xe9 \xff\xfe"+` \ud83d"}]}`))
		case "deep-result":
			if d := p.Arguments.Depth; d > 0 {
				return s.conn.respond(m.ID, deepResult(d))
			}
		case "deaf-after-call":
			if err := s.conn.respondValue(m.ID, textResult("pong")); err != nil {
				return err
			}
			fmt.Fprintln(s.errOut, "deaf-after-call: no longer reading stdin")
			<-s.ctx.Done() // the loop that reads stdin waits here
			return s.ctx.Err()
		}
		return s.conn.respondValue(m.ID, textResult("pong"))
	default:
		return s.conn.failCode(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

// progressBackwards sends the progress notifications of progress-backwards
// mode for the call whose params are given, if it asked for progress.
func (s *misbehaveServer) progressBackwards(params json.RawMessage) error {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Meta.Token) == 0 {
		return nil
	}
	var lines []byte
	for _, v := range []int{1, 3, 2, 3, 4} {
		lines = fmt.Appendf(lines, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":4}}`+"\n", p.Meta.Token, v)
	}
	return s.conn.write(lines, false)
}

// pingFlood sends count ping requests (ids "flood-1", ...) in one go. The
// answers are read only after it returns, as a server that writes without
// reading would.
func (s *misbehaveServer) pingFlood() error {
	var batch []byte
	for i := 1; i <= s.count; i++ {
		batch = fmt.Appendf(batch, `{"jsonrpc":"2.0","id":"flood-%d","method":"ping"}`+"\n", i)
		if len(batch) >= 64<<10 || i == s.count {
			if err := s.conn.write(batch, false); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// maxDeepResult bounds the nesting deep-result writes.
const maxDeepResult = 1 << 20

// deepResult is a tool result whose structuredContent holds an array
// nested depth arrays deep (at most maxDeepResult).
func deepResult(depth int) json.RawMessage {
	depth = min(depth, maxDeepResult)
	b := []byte(`{"content":[{"type":"text","text":"deep"}],"structuredContent":{"deep":`)
	b = append(b, strings.Repeat("[", depth)...)
	b = append(b, strings.Repeat("]", depth)...)
	return append(b, "}}"...)
}
