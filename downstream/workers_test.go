package downstream

import "testing"

// BenchmarkWorkersHandoff is one request handed to an idle worker and
// done: the hand-off of the stdio reading at one call in flight.
func BenchmarkWorkersHandoff(b *testing.B) {
	w := &workers{idle: make(chan func())}
	done := make(chan struct{})
	f := func() { done <- struct{}{} }
	for b.Loop() {
		w.run(f)
		<-done
	}
}
