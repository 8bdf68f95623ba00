package benchmark

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The many-tools upstream of the tools/list benchmark is an mcp-go server: what it costs
// to produce a list is not what that benchmark measures (the aggregator renders its
// catalog once). The call benchmarks use the raw echo upstream of echo_test.go instead.

// echo answers with its text argument, like the demo server's echo.
func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// echoTool is the definition every benchmark upstream tool shares, under its own name.
func echoTool(name string) mcp.Tool {
	return mcp.NewTool(name,
		mcp.WithDescription("Returns its text argument unchanged."),
		mcp.WithString("text", mcp.Required(), mcp.Description("Text to return.")),
		mcp.WithReadOnlyHintAnnotation(true),
	)
}

// newToolsServer is the upstream behind the tools/list benchmark: n echo tools named t000,
// t001, ... with small schemas.
func newToolsServer(n int) *server.MCPServer {
	s := server.NewMCPServer("bench-tools", "1.0.0", server.WithToolCapabilities(false))
	tools := make([]server.ServerTool, n)
	for i := range tools {
		tools[i] = server.ServerTool{Tool: echoTool(fmt.Sprintf("t%03d", i)), Handler: echo}
	}
	s.AddTools(tools...)
	return s
}

// serveStdio serves s on stdin/stdout until stdin ends or the process is told to stop.
func serveStdio(s *server.MCPServer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(log.New(os.Stderr, "bench-tools: ", 0))
	err := stdio.Listen(ctx, os.Stdin, os.Stdout)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
