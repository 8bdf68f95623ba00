package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
)

// JSON-RPC batches from an upstream. Protocol 2025-03-26 lets a server send
// several messages as one JSON array (and requires its peers to take them),
// so each message in one is taken as if it had come alone, whichever way it
// came: a line on stdout (stdioConn.dispatchBatch), an SSE event
// (remoteConn.unpack) or a JSON body (remoteConn.batchResponse).

// maxUpstreamBatch bounds the messages of one batch from an upstream.
const maxUpstreamBatch = 1000

// errNestedBatch is why a batch inside a batch is not taken: batches do
// not nest.
var errNestedBatch = errors.New("a batch inside a batch")

// isBatch reports whether data, one message as read, is a JSON array.
func isBatch(data []byte) bool {
	b := trimLeftSpace(data)
	return len(b) > 0 && b[0] == '['
}

// splitBatch returns the messages of a batch, each raw and a copy of its
// own, or why the batch cannot be taken: it is not a JSON array, it is
// empty, or it holds more than maxUpstreamBatch messages.
func splitBatch(data []byte) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, err
	}
	switch {
	case len(elems) == 0:
		return nil, errors.New("an empty batch")
	case len(elems) > maxUpstreamBatch:
		return nil, fmt.Errorf("a batch of %d messages is over the limit of %d", len(elems), maxUpstreamBatch)
	}
	return elems, nil
}
