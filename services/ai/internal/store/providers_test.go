package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

const missingID = "00000000-0000-4000-8000-000000000000"

func TestProviderCreateGet(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	in := provider("Fake", func(p *aiv1.Provider) {
		p.Kind = aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE
		p.BaseUrl = "http://127.0.0.1:8090/v1"
	})
	p := mustProvider(t, s, in)
	if p.Id == "" || p.CreateTime == nil || p.UpdateTime == nil {
		t.Fatalf("output fields not set: %v", p)
	}
	if d := cmp.Diff(in, p, ignoreOutput...); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	m2 := mustModel(t, s, model(p.Id, "b", 2))
	m1 := mustModel(t, s, model(p.Id, "z", 1))
	m3 := mustModel(t, s, model(p.Id, "a", 2))
	got, err := s.GetProvider(ctx, p.Id)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(p)
	want.Models = []*aiv1.Model{m1, m3, m2} // by tier, then name
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("GetProvider (-want +got):\n%s", d)
	}

	_, err = s.CreateProvider(ctx, provider("fAKE"))
	wantErr(t, err, errs.ErrAlreadyExists)
	_, err = s.GetProvider(ctx, missingID)
	wantErr(t, err, errs.ErrNotFound)
}

func TestListProviders(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	// Created out of order; "B" sorts with the lower-case names.
	for _, n := range []string{"delta", "B", "alpha", "echo", "charlie"} {
		p := mustProvider(t, s, provider(n, func(p *aiv1.Provider) { p.Enabled = n != "charlie" }))
		mustModel(t, s, model(p.Id, n+"-on", 1))
		mustModel(t, s, model(p.Id, n+"-off", 2, func(m *aiv1.Model) { m.Enabled = false }))
	}
	cases := []struct {
		name      string
		f         ProviderFilter
		want      [][]string
		wantModel int
	}{
		{"all in pages of 2", ProviderFilter{PageSize: 2}, [][]string{{"alpha", "B"}, {"charlie", "delta"}, {"echo"}}, 2},
		{"exact page", ProviderFilter{PageSize: 5}, [][]string{{"alpha", "B", "charlie", "delta", "echo"}}, 2},
		{"enabled only", ProviderFilter{PageSize: 3, EnabledOnly: true}, [][]string{{"alpha", "B", "delta"}, {"echo"}}, 1},
		{"by name, any case", ProviderFilter{PageSize: 10, Name: "b"}, [][]string{{"B"}}, 2},
		{"unknown name", ProviderFilter{PageSize: 10, Name: "zulu"}, [][]string{{}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			var got [][]string
			for range 10 {
				page, next, err := s.ListProviders(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, names(page))
				for _, p := range page {
					if len(p.Models) != tc.wantModel {
						t.Errorf("%s has %d models, want %d", p.Name, len(p.Models), tc.wantModel)
					}
				}
				if next == nil {
					break
				}
				f.After = next
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pages (-want +got):\n%s", d)
			}
		})
	}
}

func TestUpdateProvider(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	p := mustProvider(t, s, provider("one"))
	mustProvider(t, s, provider("two"))
	m := mustModel(t, s, model(p.Id, "m", 1))

	change := &aiv1.Provider{Name: "renamed", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE,
		BaseUrl: "https://example.test/v1", ApiKeyRef: "ignored", Enabled: false}
	var sawBefore, sawAfter *aiv1.Provider
	got, err := s.UpdateProvider(ctx, p.Id, change, []string{"name", "kind", "base_url", "enabled"}, func(before, after *aiv1.Provider) error {
		sawBefore, sawAfter = before, after
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(p)
	want.Name, want.Kind, want.BaseUrl, want.Enabled = "renamed", change.Kind, change.BaseUrl, false
	want.Models = []*aiv1.Model{m}
	if d := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&aiv1.Provider{}, "update_time")); d != "" {
		t.Errorf("updated (-want +got):\n%s", d)
	}
	if sawBefore.GetName() != "one" || sawAfter.GetName() != "renamed" || sawAfter.GetApiKeyRef() != "env:KEY" {
		t.Errorf("check saw before %v, after %v", sawBefore, sawAfter)
	}

	// A refusing check changes nothing.
	refused := errors.New("refused")
	_, err = s.UpdateProvider(ctx, p.Id, &aiv1.Provider{Name: "other"}, []string{"name"}, func(_, _ *aiv1.Provider) error { return refused })
	wantErr(t, err, refused)
	if again, _ := s.GetProvider(ctx, p.Id); again.GetName() != "renamed" {
		t.Errorf("name after refused update = %q", again.GetName())
	}

	_, err = s.UpdateProvider(ctx, p.Id, &aiv1.Provider{Name: "TWO"}, []string{"name"}, nil)
	wantErr(t, err, errs.ErrAlreadyExists)
	_, err = s.UpdateProvider(ctx, p.Id, &aiv1.Provider{}, []string{"models"}, nil)
	wantErr(t, err, errs.ErrInvalid)
	_, err = s.UpdateProvider(ctx, p.Id, &aiv1.Provider{}, nil, nil)
	wantErr(t, err, errs.ErrInvalid)
	_, err = s.UpdateProvider(ctx, missingID, &aiv1.Provider{Name: "x"}, []string{"name"}, nil)
	wantErr(t, err, errs.ErrNotFound)
}

func TestDeleteProvider(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	p := mustProvider(t, s, provider("p"))
	m := mustModel(t, s, model(p.Id, "m", 1))
	if _, err := s.RecordUsage(ctx, &aiv1.UsageRecord{ModelId: m.Id, Rpc: "PlanTask"}); err != nil {
		t.Fatal(err)
	}

	err := s.DeleteProvider(ctx, p.Id)
	wantErr(t, err, errs.ErrFailedPrecondition)
	if err := s.DeleteModel(ctx, m.Id); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProvider(ctx, p.Id); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetProvider(ctx, p.Id)
	wantErr(t, err, errs.ErrNotFound)
	wantErr(t, s.DeleteProvider(ctx, p.Id), errs.ErrNotFound)

	// The ledger keeps the records of a deleted model.
	recs, _, err := s.ListUsageRecords(ctx, UsageFilter{ModelID: m.Id}, 10, nil)
	if err != nil || len(recs) != 1 {
		t.Fatalf("usage of the deleted model = %v, %v; want 1 record", recs, err)
	}
}

func TestCatalogue(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	var want []string
	for i := range 3 {
		p := mustProvider(t, s, provider(fmt.Sprintf("p%d", i), func(p *aiv1.Provider) { p.Enabled = i != 1 }))
		mustModel(t, s, model(p.Id, "m", 1, func(m *aiv1.Model) { m.Enabled = i != 2 }))
		want = append(want, p.Name)
	}
	got, err := s.Catalogue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, names(got)); d != "" {
		t.Errorf("providers (-want +got):\n%s", d)
	}
	for _, p := range got {
		if len(p.Models) != 1 {
			t.Errorf("%s: %d models, want 1 (disabled ones included)", p.Name, len(p.Models))
		}
	}
}
