package service_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/memory/internal/service"
)

// ListMemories pages newest first through every memory the filter selects, each once,
// and its page tokens resume exactly after the last memory of a page.
func TestListMemoriesPages(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	var want, tagged []string
	for i := range 7 {
		req := &memoryv1.StoreMemoryRequest{Content: fmt.Sprintf("Memory number %d: the deploy script lives in ops/deploy-%d.sh.", i, i)}
		if i%2 == 0 {
			req.Tags = []string{"even"}
		}
		m := e.store(t, e.alice, req)
		want = append(want, m.GetId())
		if i%2 == 0 {
			tagged = append(tagged, m.GetId())
		}
	}
	slices.Reverse(want)
	slices.Reverse(tagged)
	e.store(t, e.bob, &memoryv1.StoreMemoryRequest{Content: "Bob's memory is not Alice's."})

	list := func(tags []string) []string {
		var got []string
		tok := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("no last page after %d pages: %v", pages, got)
			}
			resp, err := e.client.ListMemories(e.alice, &memoryv1.ListMemoriesRequest{PageSize: 2, PageToken: tok, Tags: tags})
			if err != nil {
				t.Fatalf("ListMemories page %d: %v", pages, err)
			}
			if len(resp.GetMemories()) > 2 {
				t.Fatalf("page of %d memories, want at most 2", len(resp.GetMemories()))
			}
			for _, m := range resp.GetMemories() {
				got = append(got, m.GetId())
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				return got
			}
		}
	}
	if got := list(nil); !slices.Equal(got, want) {
		t.Errorf("pages = %v\nwant    %v", got, want)
	}
	if got := list([]string{"even"}); !slices.Equal(got, tagged) {
		t.Errorf("tagged pages = %v\nwant           %v", got, tagged)
	}

	// A token from before the (time, id) codec kept microseconds held nanoseconds: it is
	// refused, not read as a time tens of thousands of years ahead.
	m, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: want[3]})
	if err != nil {
		t.Fatal(err)
	}
	old := validate.EncodePageToken("m1", strconv.FormatInt(m.GetMemory().GetCreateTime().AsTime().UnixNano(), 10), want[3])
	_, err = e.client.ListMemories(e.alice, &memoryv1.ListMemoriesRequest{PageSize: 2, PageToken: old})
	wantCode(t, err, codes.InvalidArgument, "page_token")
}
