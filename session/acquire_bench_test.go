package session

import (
	"context"
	"testing"
)

// BenchmarkAcquire is one call's grant of an instance that already serves
// it, and its Done: a session's lease (announced, as its first call's
// result does), and a stateless server's shared instance.
func BenchmarkAcquire(b *testing.B) {
	for _, bench := range []struct {
		name, spec string
		stateless  bool
	}{{"lease", "counter", false}, {"shared", "tools", true}} {
		b.Run(bench.name, func(b *testing.B) {
			pool := startPool(b, newDemoFactory(b, bench.spec), Config{Server: bench.spec, Stateless: bench.stateless})
			key := named("a")
			first := acquire(b, pool, key)
			first.Announced()
			first.Done()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				g, err := pool.AcquireAs(ctx, key, "")
				if err != nil {
					b.Fatal(err)
				}
				g.Done()
			}
		})
	}
}
