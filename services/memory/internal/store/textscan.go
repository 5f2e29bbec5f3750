package store

import (
	"fmt"
	"slices"

	"github.com/thefold/thefold/pkg/db"

	"github.com/thefold/thefold/services/memory/internal/tsindex"
)

// The in-process full-text ranking of memories, beside the in-process vector ranking
// (scan.go), which holds each owner's full-text vectors with the vectors and keeps both
// current the same way. In PostgreSQL the full-text ranking was the longer of a search's
// two rankings on the latency benchmark's 100k memories: the GIN index's lookups of the
// rarest words, each matching row's tsvector read and ranked by ts_rank, and a plan made
// again for each query's terms; and it ranked an arbitrary subset (LIMIT) of the rows a
// common word matched. Here it ranks every row the rarest words pick (by the owner's exact
// document frequencies, not estimates), each by what ts_rank would give it, and the
// request's filters are applied to the best 2k by the held columns (held.go), as for the
// vector ranking; textScanQuery applies them in PostgreSQL when the text ranking's
// comparison asks for it (SearchQuery.TextInDB).

// rankText ranks the owner's memories by full text in this process (text, the owner's
// index): the best 2k by their rank against all of lexemes (the query's) ORed, and how many
// were ranked (tsindex.Index.Search picks them, at most half the text pool unless even the
// rarest lexemes ANDed match more).
func rankText(r ranking, text *tsindex.Index, lexemes []string) ([]tsindex.Hit, int) {
	return text.Search(lexemes, r.textPool()/2, 2*r.k)
}

// textScanQuery is the k rows of best rank among hits (the in-process ranking's best,
// best first) that r's filters let through, in r.columns and the scores, best first:
// textQuery's result, from the in-process ranking. The vector score is 0 (the caller has
// the scan's) and the text score the hit's rank, so no row's embedding or tsvector is read.
// A plain query, like scanQuery: its plan does not depend on the arguments.
func textScanQuery(r ranking, hits []tsindex.Hit) (string, []any) {
	ids := make([]string, len(hits))
	ranks := make([]float32, len(hits))
	for i, h := range hits {
		ids[i], ranks[i] = h.ID, h.Rank
	}
	c := db.Conds{Args: slices.Clone(r.args)}
	k, in, rank := c.Arg(r.k), c.Arg(ids), c.Arg(ranks)
	return fmt.Sprintf(`SELECT %s, 0::float8, u.rank
		FROM unnest(%s::uuid[], %s::real[]) AS u(id, rank) JOIN %s m ON m.id = u.id
		WHERE %s ORDER BY u.rank DESC, m.id LIMIT %s`,
		r.columns, in, rank, r.table, r.where, k), c.Args
}
