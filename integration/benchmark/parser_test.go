package benchmark

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/pipeio"
)

// serveParser starts command and passes messages between it and stdin/stdout as a hop
// that reads them must at least: each line is framed and decoded with the aggregator's
// own reader and decoder (internal/jsonrpc), each request gets an id of the hop's own
// and each response its client's id back, and each message is encoded again. It runs
// as the stdio server does (one processor, pipes through the poller with direct system
// calls, internal/pipeio), with one goroutine per direction that does all of a
// message's work: no goroutine per request, no routing, no limits, no deadline. It is
// the reference for what the aggregator's own handling of a call costs on top of
// reading it. It returns when the command's stdout ends.
func serveParser(command []string) error {
	runtime.GOMAXPROCS(1)
	cmd, in, out, err := startChild(command)
	if err != nil {
		return err
	}
	toUpstream, fromUpstream := pipeio.New(in), pipeio.New(out)
	fromClient, toClient := pollable(os.Stdin, 0), pollable(os.Stdout, 1)
	var (
		mu   sync.Mutex
		next int64
		ids  = map[int64][]byte{} // the client's id of each request sent upstream
	)
	go func() {
		defer in.Close() // the client's EOF is the upstream's
		r := jsonrpc.NewReader(fromClient, 0)
		var line []byte
		for {
			data, err := r.Read()
			if err != nil {
				return
			}
			m, err := jsonrpc.Decode(data)
			if err != nil {
				continue
			}
			mu.Lock()
			next++
			id := next
			ids[id] = m.ID
			mu.Unlock()
			m.ID = strconv.AppendInt(nil, id, 10)
			line = append(m.Append(line[:0]), '\n')
			if _, err := toUpstream.Write(line); err != nil {
				return
			}
		}
	}()
	r := jsonrpc.NewReader(fromUpstream, 0)
	var line []byte
	for {
		data, err := r.Read()
		if err != nil {
			break
		}
		m, err := jsonrpc.Decode(data)
		if err != nil {
			continue
		}
		id, _ := strconv.ParseInt(string(m.ID), 10, 64)
		mu.Lock()
		m.ID = ids[id]
		delete(ids, id)
		mu.Unlock()
		line = append(m.Append(line[:0]), '\n')
		if _, err := toClient.Write(line); err != nil {
			break
		}
	}
	return cmd.Wait()
}

// pollable returns f (descriptor fd, a pipe) in non-blocking mode, read and written
// through the poller as the stdio server does with its client's pipes.
func pollable(f *os.File, fd int) *pipeio.Pipe {
	if err := syscall.SetNonblock(fd, true); err != nil {
		return pipeio.New(f)
	}
	return pipeio.New(os.NewFile(uintptr(fd), f.Name()))
}
