package meta

import (
	"context"
	"fmt"
	"testing"

	"github.com/streamcast/streamcast/pkg/schema"
)

// BenchmarkResolve resolves a stream at rest (home and published copy the
// same version) whose metadata lists the logs a run of back-to-back
// migrations leaves: a migration resolves its stream several times, so
// this is the part of its CPU and garbage that grows with every log.
func BenchmarkResolve(b *testing.B) {
	sch, err := schema.Compile([]byte(`{"type":"object","properties":{"id":{"type":"integer"},"sym":{"type":"string"}},"required":["id","sym"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, logs := range []int{1, 60} {
		b.Run(fmt.Sprintf("logs=%d", logs), func(b *testing.B) {
			e := testEnv{kind: "file", root: b.TempDir() + "/root", pub: "file://" + b.TempDir()}
			st := e.store(b, "trades")
			m, err := New("trades")
			if err != nil {
				b.Fatal(err)
			}
			for i := 1; i <= logs; i++ {
				if i > 1 {
					end := int64(i * 1000)
					m.Logs[len(m.Logs)-1].State, m.Logs[len(m.Logs)-1].EndOffset = Sealed, &end
				}
				name := LogName("trades", i)
				lg := Log{Name: name, Schema: sch.JSON(), Location: e.layout(b).StoredPublished("trades", name), StartOffset: int64(i * 1000)}
				if err := m.AddLog(lg, sch); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := st.Commit(context.Background(), m); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Resolve(context.Background(), st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
