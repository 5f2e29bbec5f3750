package embed

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/embed/internal/evalset"
)

// BenchmarkHNSWRecall measures how much of the exact top 10 a pgvector HNSW index (cosine,
// default m 16 and ef_construction 64, ef_search 40 as memory searches) returns for each
// embedder's vectors: the documented functions and their descriptions of GOROOT's standard
// library and google.golang.org/grpc (over 10k texts), 500 descriptions held out as
// queries. Local's mostly-zero vectors make a poor graph; this says how much local@2's
// dense ones fix it. It needs PostgreSQL with pgvector (THEFOLD_TEST_DATABASE_URL) and
// prints figures, asserting nothing.
//
//	go test -run '^$' -bench HNSWRecall -benchtime 1x ./embed/
func BenchmarkHNSWRecall(b *testing.B) {
	const queries, k, efSearch = 500, 10, 40
	var texts []string
	for _, mod := range []string{"", "google.golang.org/grpc"} {
		var dir string
		if mod == "" {
			out, err := exec.Command("go", "env", "GOROOT").Output()
			if err != nil {
				b.Fatal(err)
			}
			dir = filepath.Join(strings.TrimSpace(string(out)), "src")
		} else if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output(); err == nil {
			dir = strings.TrimSpace(string(out))
		}
		if dir == "" {
			continue
		}
		for _, p := range evalset.CodeDoc(dir, func(rel string) bool { return rel == "cmd" }) {
			texts = append(texts, p.Query, p.Doc)
		}
	}
	if len(texts) < 2000 {
		b.Skipf("only %d texts", len(texts))
	}
	// Every n-th description is a query, not a row.
	step := len(texts) / 2 / queries
	var rows, qs []string
	for i, t := range texts {
		if i%2 == 0 && (i/2)%step == 0 && len(qs) < queries {
			qs = append(qs, t)
		} else {
			rows = append(rows, t)
		}
	}
	trained, err := NewTrained(DefaultDims)
	if err != nil {
		b.Fatal(err)
	}
	pool, _ := dbtest.NewDatabase(b, "embedbench", nil)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	b.ReportMetric(0, "ns/op")
	fmt.Printf("HNSW recall@%d against exact search, %d rows, %d queries, ef_search %d:\n", k, len(rows), len(qs), efSearch)
	fmt.Printf("  %-9s %9s %9s %10s %12s\n", "embedder", "recall@10", "non-zero", "index", "per query")
	for _, e := range []Embedder{NewLocal(DefaultDims), trained} {
		rv, qv := e.Embed(rows), e.Embed(qs)
		table := strings.ReplaceAll(e.Version(), "@", "_")
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v vector(%d))", table, e.Dimensions())); err != nil {
			b.Fatal(err)
		}
		batch := &pgx.Batch{}
		for i, v := range rv {
			batch.Queue(fmt.Sprintf("INSERT INTO %s VALUES ($1, $2::vector)", table), i, vecLiteral(v))
		}
		if err := conn.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX ON %s USING hnsw (v vector_cosine_ops)", table)); err != nil {
			b.Fatal(err)
		}
		tIndex := time.Since(t0)
		if _, err := conn.Exec(ctx, fmt.Sprintf("SET hnsw.ef_search = %d; SET enable_seqscan = off", efSearch)); err != nil {
			b.Fatal(err)
		}
		var hit float64
		t0 = time.Now()
		for qi, q := range qv {
			exact := topK(q, rv, k)
			r, err := conn.Query(ctx, fmt.Sprintf("SELECT id FROM %s ORDER BY v <=> $1::vector LIMIT %d", table, k), vecLiteral(q))
			if err != nil {
				b.Fatal(err)
			}
			got, err := pgx.CollectRows(r, pgx.RowTo[int])
			if err != nil {
				b.Fatalf("query %d: %v", qi, err)
			}
			for _, id := range got {
				if slices.Contains(exact, id) {
					hit++
				}
			}
		}
		per := time.Since(t0) / time.Duration(len(qv))
		var nz, all float64
		for _, v := range rv {
			for _, x := range v {
				if x != 0 {
					nz++
				}
			}
			all += float64(len(v))
		}
		recall := hit / float64(k*len(qv))
		fmt.Printf("  %-9s %9.3f %9.3f %10s %12s\n", e.Version(), recall, nz/all, tIndex.Round(time.Millisecond), per.Round(time.Microsecond))
		b.ReportMetric(recall, strings.ReplaceAll(e.Version(), "@", "")+"-hnsw-r@10")
	}
}

// topK is the indexes of the k rows nearest q by exact cosine (dot product of unit vectors;
// zero vectors, which pgvector leaves out of cosine ranking, left out too).
func topK(q []float32, rows [][]float32, k int) []int {
	type scored struct {
		i int
		s float64
	}
	var all []scored
	for i, r := range rows {
		var s, n float32
		for j := range q {
			s += q[j] * r[j]
			n += r[j] * r[j]
		}
		if n > 0 {
			all = append(all, scored{i, float64(s)})
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		return 0
	})
	out := make([]int, 0, k)
	for _, s := range all[:min(k, len(all))] {
		out = append(out, s.i)
	}
	return out
}

func vecLiteral(v []float32) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	sb.WriteByte(']')
	return sb.String()
}
