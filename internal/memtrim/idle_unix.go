//go:build unix

package memtrim

import (
	"context"
	"syscall"
	"time"
)

// IdleCheck is how often WhenIdle looks at the process's CPU time.
const IdleCheck = 10 * time.Second

// idleCPU is the CPU time under which an IdleCheck period counts as idle:
// 0.5 % of one processor.
const idleCPU = IdleCheck / 200

// WhenIdle trims the process's memory (Trim) each time it falls idle after
// work: when it used less than idleCPU in an IdleCheck period after one in
// which it used more. A server that has served requests has the code and
// data of its request paths back in its resident set, and its heap grown;
// trimming once it is idle gives them back until the next request. It
// returns when ctx ends.
func WhenIdle(ctx context.Context) { whenIdle(ctx, IdleCheck, idleCPU, cpuTime, Trim) }

// whenIdle is WhenIdle with its clock, measure and action given.
func whenIdle(ctx context.Context, every, quiet time.Duration, cpu func() time.Duration, trim func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, busy := cpu(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := cpu()
		switch {
		case now-last >= quiet:
			busy = true
		case busy:
			busy = false
			trim()
			now = cpu() // the trim's own work is not the server's
		}
		last = now
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
