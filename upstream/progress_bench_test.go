package upstream

import (
	"encoding/json"
	"testing"
)

// BenchmarkProgressNotification is what the upstream's reader does with a
// progress notification of a call in flight: find the call by its token,
// check that the progress goes forward, and hand it on with the caller's
// token.
func BenchmarkProgressNotification(b *testing.B) {
	inst := &Instance{progress: map[int64]*progressSink{}}
	delivered := 0
	inst.progress[7] = &progressSink{downstream: json.RawMessage(`"client-token"`), onProgress: func(json.RawMessage) { delivered++ }}
	params := json.RawMessage(`{"progressToken":"agg-7","progress":50,"total":100,"message":"working"}`)
	b.ReportAllocs()
	for b.Loop() {
		inst.progress[7].gate.any = false // or the gate drops the same progress again
		inst.notified(Notification{Method: "notifications/progress", Params: params})
	}
	if delivered == 0 {
		b.Fatal("nothing delivered")
	}
}
