package benchmark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// serveTransports starts command as the aggregator starts a stdio server
// (upstream.Start: its own process group, the handshake, ids of its own) and
// serves stdin and stdout as the aggregator's stdio server does
// (downstream.ServeStdio on the polled pipes, one processor), with a Handler
// that passes each request to that one instance as it came and its answer
// back: tools/call started without a goroutine waiting (downstream.Starter,
// upstream.Instance.Start), anything else with Instance.Do. Nothing else: no
// catalog, names, profile, lease, limits, deadline, policy or metrics. It is
// the reference for what the aggregator's own handling of a call costs on
// top of its two transports, as the parser is for what the transports cost
// on top of reading each message. It returns when the client's input ends.
func serveTransports(command []string) error {
	return withTransportsUpstream(command, func(ctx context.Context, h transportsHop, log *slog.Logger) error {
		in, out, polled, restore := pipeio.PollStdio(os.Stdin, os.Stdout)
		defer restore()
		if polled {
			pipeio.OneProcessor(log)
		}
		err := downstream.ServeStdio(ctx, h, in, out, downstream.StdioOptions{Logger: log})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
}

// serveHTTPTransports is serveTransports over HTTP: the aggregator's HTTP
// server (downstream.HTTP, its Serve and its MCP endpoint with the Host and
// Origin checks, sessions included) in front of the same one instance, with
// no authentication, views or gateway around it. It is the reference for
// what the aggregator's own handling of a call costs on top of its HTTP and
// stdio transports, as the router is for what they cost on top of decoding
// each request.
func serveHTTPTransports(command []string) error {
	return withTransportsUpstream(command, func(ctx context.Context, h transportsHop, log *slog.Logger) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		edge := downstream.NewHTTP(h, downstream.HTTPOptions{Logger: log})
		mux := http.NewServeMux()
		mux.Handle("/mcp", edge.Endpoint(func(h http.Handler) http.Handler { return h }))
		go func() {
			<-ctx.Done()
			_ = edge.Shutdown(context.Background())
		}()
		fmt.Fprintf(os.Stderr, "msg=listening url=http://%s/mcp\n", ln.Addr())
		return edge.Serve(ln, mux)
	})
}

// withTransportsUpstream starts command as a stdio upstream, as the
// aggregator starts a shared one, and runs serve with the Handler in front
// of it until serve returns; ctx ends at SIGTERM or an interrupt. The log
// (warnings and errors) goes to stderr.
func withTransportsUpstream(command []string, serve func(ctx context.Context, h transportsHop, log *slog.Logger) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := &config.Server{ID: "echo", Stateless: true, Command: command[0], Args: command[1:],
		Env: map[string]string{helperEnv: "1"}}
	inst, err := upstream.Start(ctx, srv, upstream.Options{Logger: log})
	if err != nil {
		return err
	}
	defer inst.Close()
	return serve(ctx, transportsHop{inst}, log)
}

// transportsHop is serveTransports' Handler: every request goes to inst as
// it came.
type transportsHop struct{ inst *upstream.Instance }

func (h transportsHop) Handle(ctx context.Context, req *downstream.Request) *jsonrpc.Message {
	return answerOf(h.inst.Do(ctx, upstream.Request{Method: req.Msg.Method, Params: req.Msg.Params}))
}

// Start sends a tools/call and returns; the goroutine that reads the
// instance's answer completes it.
func (h transportsHop) Start(ctx context.Context, req *downstream.Request, done downstream.Completion) bool {
	if req.Msg.Method != "tools/call" {
		return false
	}
	return h.inst.Start(ctx, upstream.Request{Method: req.Msg.Method, Params: req.Msg.Params}, startedAnswer{done}) != nil
}

func (transportsHop) Notified(context.Context, downstream.Session, *jsonrpc.Message) {}
func (transportsHop) SessionOpened(downstream.Session)                               {}
func (transportsHop) SessionClosed(downstream.Session)                               {}

// startedAnswer passes a started call's answer on, encoded before Complete
// returns (the result is lent).
type startedAnswer struct{ done downstream.Completion }

func (a startedAnswer) Complete(result json.RawMessage, err error) {
	a.done.Complete(answerOf(result, err))
}

// answerOf is the response to a request the upstream answered with result,
// or failed with err.
func answerOf(result json.RawMessage, err error) *jsonrpc.Message {
	var rpcErr *upstream.RPCError
	switch {
	case err == nil:
		return &jsonrpc.Message{Result: result}
	case errors.As(err, &rpcErr):
		return &jsonrpc.Message{Error: &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}}
	default:
		return &jsonrpc.Message{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
}
