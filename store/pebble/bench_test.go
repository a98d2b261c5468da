package pebble

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/store"
)

var committerCounts = []int{1, 16, 64, 128}

// runCommitters runs b.N calls of commit spread over n goroutines; each call
// gets a unique sequence number.
func runCommitters(b *testing.B, n int, commit func(seq uint64) error) {
	var next atomic.Uint64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range n {
		wg.Go(func() {
			for {
				seq := next.Add(1)
				if seq > uint64(b.N) {
					return
				}
				if err := commit(seq); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}

func benchKey(seq uint64) []byte {
	k := make([]byte, 10)
	copy(k, "m/")
	binary.BigEndian.PutUint64(k[2:], seq)
	return k
}

// BenchmarkCommit measures durable commits of single-Set batches of 1 KiB
// through the group committer, with the default Linger and without one.
func BenchmarkCommit(b *testing.B) {
	for _, linger := range []time.Duration{-1, DefaultLinger} {
		for _, n := range committerCounts {
			b.Run(fmt.Sprintf("linger=%v/committers=%d", linger, n), func(b *testing.B) {
				s := openT(b, Options{Linger: linger})
				defer s.Close()
				value := make([]byte, 1024)
				b.SetBytes(1024)
				b.ResetTimer()
				start := time.Now()
				runCommitters(b, n, func(seq uint64) error {
					var batch store.Batch
					batch.Set(benchKey(seq), value)
					return s.Commit(context.Background(), &batch)
				})
				reportCommits(b, s, start)
			})
		}
	}
}

// BenchmarkQueueChurn is the broker's steady state: each commit sends one
// 1 KiB message and completes (deletes) the one sent before it, 2 ops.
func BenchmarkQueueChurn(b *testing.B) {
	for _, n := range []int{16, 128, 512} {
		b.Run(fmt.Sprintf("committers=%d", n), func(b *testing.B) {
			s := openT(b, Options{})
			defer s.Close()
			value := make([]byte, 1024)
			b.ResetTimer()
			start := time.Now()
			runCommitters(b, n, func(seq uint64) error {
				var batch store.Batch
				batch.Set(benchKey(seq), value)
				if seq > uint64(n) {
					batch.Delete(benchKey(seq - uint64(n)))
				}
				return s.Commit(context.Background(), &batch)
			})
			reportCommits(b, s, start)
			b.ReportMetric(float64(s.Stats().Ops)/time.Since(start).Seconds(), "ops/s")
		})
	}
}

func reportCommits(b *testing.B, s *Store, start time.Time) {
	elapsed := time.Since(start).Seconds()
	st := s.Stats()
	b.ReportMetric(float64(b.N)/elapsed, "msg/s")
	b.ReportMetric(float64(st.Syncs)/elapsed, "syncs/s")
	if st.Syncs > 0 {
		b.ReportMetric(float64(st.Ops)/float64(st.Syncs), "ops/sync")
	}
}

// BenchmarkScan1M times the broker's recovery path: a full scan of 1,000,000
// records of 1 KiB (incompressible), after a reopen.
func BenchmarkScan1M(b *testing.B) {
	const records = 1_000_000
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	for i := 0; i < records; i += 1000 {
		var batch store.Batch
		for j := i; j < i+1000; j++ {
			v := make([]byte, len(value))
			_, _ = rand.Read(v)
			batch.Set(benchKey(uint64(j)), v)
		}
		if err := s.Commit(context.Background(), &batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(records * 1024)
	for b.Loop() {
		n := 0
		err := s.Scan(context.Background(), nil, nil, func(k, v []byte) error {
			n++
			return nil
		})
		if err != nil || n != records {
			b.Fatalf("scan: %d records, %v", n, err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/scan")
}

// BenchmarkPebbleSync is the reference: plain db.Set(k, v, pebble.Sync) from
// n goroutines, relying on Pebble's own commit pipeline.
func BenchmarkPebbleSync(b *testing.B) {
	for _, n := range committerCounts {
		b.Run(fmt.Sprintf("writers=%d", n), func(b *testing.B) {
			fs := &syncCountingFS{FS: vfs.Default}
			db, err := pebble.Open(b.TempDir(), &pebble.Options{
				Logger: slogLogger{slog.New(slog.DiscardHandler)},
				FS:     fs,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			value := make([]byte, 1024)
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			runCommitters(b, n, func(seq uint64) error {
				return db.Set(benchKey(seq), value, pebble.Sync)
			})
			elapsed := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/elapsed, "msg/s")
			b.ReportMetric(float64(fs.syncs.Load())/elapsed, "syncs/s")
			b.ReportMetric(float64(b.N)/float64(fs.syncs.Load()), "ops/sync")
		})
	}
}
