package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/validate"
)

func TestRegistryInvalidArgument(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	c := e.client
	// The subtests run in parallel once this function has returned, behind the package's
	// other parallel tests: e.admin's and e.user's 30 s, counted from their making, ran out
	// before the last subtests called, on a loaded machine. The same tokens, 2 minutes.
	ctx, user := withOwnDeadline(t, e.admin), withOwnDeadline(t, e.user)
	p := e.createProvider(t, &aiv1.Provider{Name: "p", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, Enabled: true})
	m := e.createModel(t, testModel(p.Id, "m", 2))
	thinker := testModel(p.Id, "thinker", 3)
	thinker.SupportsReasoning = true
	r := e.createModel(t, thinker)

	createProvider := func(mod func(*aiv1.Provider)) func() error {
		return func() error {
			in := &aiv1.Provider{Name: "new", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE, BaseUrl: "http://llm.example.test:1/v1"}
			mod(in)
			_, err := c.CreateProvider(ctx, &aiv1.CreateProviderRequest{Provider: in})
			return err
		}
	}
	updateProvider := func(id string, in *aiv1.Provider, paths ...string) func() error {
		return func() error {
			_, err := c.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: id, Provider: in, UpdateMask: mask(paths...)})
			return err
		}
	}
	createModel := func(mod func(*aiv1.Model)) func() error {
		return func() error {
			in := testModel(p.Id, "new", 1)
			mod(in)
			_, err := c.CreateModel(ctx, &aiv1.CreateModelRequest{Model: in})
			return err
		}
	}
	updateModel := func(id string, in *aiv1.Model, paths ...string) func() error {
		return func() error {
			_, err := c.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: id, Model: in, UpdateMask: mask(paths...)})
			return err
		}
	}
	listModels := func(req *aiv1.ListModelsRequest) func() error {
		return func() error { _, err := c.ListModels(ctx, req); return err }
	}
	selectModel := func(req *aiv1.SelectModelRequest) func() error {
		return func() error { _, err := c.SelectModel(user, req); return err }
	}
	getUsage := func(req *aiv1.GetUsageRequest) func() error {
		return func() error { _, err := c.GetUsage(ctx, req); return err }
	}
	listUsage := func(req *aiv1.ListUsageRecordsRequest) func() error {
		return func() error { _, err := c.ListUsageRecords(ctx, req); return err }
	}
	ts := timestamppb.New
	t0 := e.clk.Now()
	forged := validate.EncodePageToken("v1", "x", "y")

	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		// ListProviders
		{"list providers: page_size", func() error { _, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{PageSize: 201}); return err }, "page_size"},
		{"list providers: negative page_size", func() error { _, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{PageSize: -1}); return err }, "page_size"},
		{"list providers: garbage token", func() error { _, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{PageToken: "!!"}); return err }, "page_token"},
		{"list providers: forged token", func() error {
			_, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{PageToken: forged})
			return err
		}, "page_token"},
		{"list providers: bad name", func() error { _, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{Name: "a b"}); return err }, "name"},
		// GetProvider
		{"get provider: missing id", func() error { _, err := c.GetProvider(ctx, &aiv1.GetProviderRequest{}); return err }, "id"},
		{"get provider: garbage id", func() error { _, err := c.GetProvider(ctx, &aiv1.GetProviderRequest{Id: "x"}); return err }, "id"},
		// CreateProvider
		{"create provider: missing provider", func() error { _, err := c.CreateProvider(ctx, &aiv1.CreateProviderRequest{}); return err }, "provider"},
		{"create provider: missing name", createProvider(func(p *aiv1.Provider) { p.Name = "" }), "provider.name"},
		{"create provider: name with space", createProvider(func(p *aiv1.Provider) { p.Name = "my provider" }), "provider.name"},
		{"create provider: name with colon", createProvider(func(p *aiv1.Provider) { p.Name = "a:b" }), "provider.name"},
		{"create provider: name too long", createProvider(func(p *aiv1.Provider) { p.Name = strings.Repeat("n", 64) }), "provider.name"},
		{"create provider: kind unspecified", createProvider(func(p *aiv1.Provider) { p.Kind = 0 }), "provider.kind"},
		{"create provider: kind undefined", createProvider(func(p *aiv1.Provider) { p.Kind = 42 }), "provider.kind"},
		{"create provider: base_url not http", createProvider(func(p *aiv1.Provider) { p.BaseUrl = "ftp://x/v1" }), "provider.base_url"},
		{"create provider: compatible without base_url", createProvider(func(p *aiv1.Provider) { p.BaseUrl = "" }), "provider.base_url"},
		{"create provider: a key for a ref", createProvider(func(p *aiv1.Provider) { p.ApiKeyRef = "sk-ant-api03-abc" }), "provider.api_key_ref"},
		{"create provider: bad env ref", createProvider(func(p *aiv1.Provider) { p.ApiKeyRef = "env:1BAD" }), "provider.api_key_ref"},
		{"create provider: ref with space", createProvider(func(p *aiv1.Provider) { p.ApiKeyRef = "my secret" }), "provider.api_key_ref"},
		// UpdateProvider
		{"update provider: missing provider", updateProvider(p.Id, nil, "name"), "provider"},
		{"update provider: no mask, no field set", updateProvider(p.Id, &aiv1.Provider{Id: p.Id}), "update_mask"},
		{"update provider: output-only path", updateProvider(p.Id, &aiv1.Provider{}, "models"), "update_mask"},
		{"update provider: unknown path", updateProvider(p.Id, &aiv1.Provider{}, "enabled", "id"), "update_mask"},
		{"update provider: missing id", updateProvider("", &aiv1.Provider{Name: "x"}, "name"), "id"},
		{"update provider: body names another", updateProvider(p.Id, &aiv1.Provider{Id: regMissingID, Name: "x"}, "name"), "provider.id"},
		{"update provider: empty name", updateProvider(p.Id, &aiv1.Provider{}, "name"), "provider.name"},
		{"update provider: unspecified kind", updateProvider(p.Id, &aiv1.Provider{}, "kind"), "provider.kind"},
		{"update provider: bad base_url", updateProvider(p.Id, &aiv1.Provider{BaseUrl: "localhost"}, "base_url"), "provider.base_url"},
		{"update provider: key for a ref", updateProvider(p.Id, &aiv1.Provider{ApiKeyRef: "AIzaSyabc"}, "api_key_ref"), "provider.api_key_ref"},
		// DeleteProvider
		{"delete provider: garbage id", func() error { _, err := c.DeleteProvider(ctx, &aiv1.DeleteProviderRequest{Id: "1"}); return err }, "id"},
		// ListModels
		{"list models: garbage provider_id", listModels(&aiv1.ListModelsRequest{ProviderId: "x"}), "provider_id"},
		{"list models: bad tag", listModels(&aiv1.ListModelsRequest{Tag: "Coding"}), "tag"},
		{"list models: tier 6", listModels(&aiv1.ListModelsRequest{Tier: 6}), "tier"},
		{"list models: negative tier", listModels(&aiv1.ListModelsRequest{Tier: -1}), "tier"},
		{"list models: name with space", listModels(&aiv1.ListModelsRequest{Name: "a b"}), "name"},
		{"list models: page_size", listModels(&aiv1.ListModelsRequest{PageSize: 1000}), "page_size"},
		{"list models: forged token", listModels(&aiv1.ListModelsRequest{PageToken: forged}), "page_token"},
		{"list models: bad tier in token", listModels(&aiv1.ListModelsRequest{PageToken: validate.EncodePageToken("v1", "YQ", "9", "YQ", regMissingID)}), "page_token"},
		// GetModel
		{"get model: missing id", func() error { _, err := c.GetModel(ctx, &aiv1.GetModelRequest{}); return err }, "id"},
		// CreateModel
		{"create model: missing model", func() error { _, err := c.CreateModel(ctx, &aiv1.CreateModelRequest{}); return err }, "model"},
		{"create model: missing provider_id", createModel(func(m *aiv1.Model) { m.ProviderId = "" }), "model.provider_id"},
		{"create model: garbage provider_id", createModel(func(m *aiv1.Model) { m.ProviderId = "p" }), "model.provider_id"},
		{"create model: missing name", createModel(func(m *aiv1.Model) { m.Name = "" }), "model.name"},
		{"create model: name with space", createModel(func(m *aiv1.Model) { m.Name = "gpt 4" }), "model.name"},
		{"create model: display_name too long", createModel(func(m *aiv1.Model) { m.DisplayName = strings.Repeat("d", 201) }), "model.display_name"},
		{"create model: tier 0", createModel(func(m *aiv1.Model) { m.Tier = 0 }), "model.tier"},
		{"create model: tier 6", createModel(func(m *aiv1.Model) { m.Tier = 6 }), "model.tier"},
		{"create model: negative input price", createModel(func(m *aiv1.Model) { m.InputMicrosPerMtok = -1 }), "model.input_micros_per_mtok"},
		{"create model: negative output price", createModel(func(m *aiv1.Model) { m.OutputMicrosPerMtok = -1 }), "model.output_micros_per_mtok"},
		{"create model: negative cache read", createModel(func(m *aiv1.Model) { m.CacheReadMicrosPerMtok = -1 }), "model.cache_read_micros_per_mtok"},
		{"create model: absurd cache write", createModel(func(m *aiv1.Model) { m.CacheWriteMicrosPerMtok = 1 << 60 }), "model.cache_write_micros_per_mtok"},
		{"create model: negative context", createModel(func(m *aiv1.Model) { m.ContextWindow = -1 }), "model.context_window"},
		{"create model: negative max output", createModel(func(m *aiv1.Model) { m.MaxOutputTokens = -1 }), "model.max_output_tokens"},
		{"create model: output over context", createModel(func(m *aiv1.Model) { m.MaxOutputTokens = m.ContextWindow + 1 }), "model.max_output_tokens"},
		{"create model: negative dims", createModel(func(m *aiv1.Model) { m.EmbeddingDimensions = -1 }), "model.embedding_dimensions"},
		{"create model: upper-case tag", createModel(func(m *aiv1.Model) { m.Tags = []string{"Chat"} }), "model.tags"},
		{"create model: long tag", createModel(func(m *aiv1.Model) { m.Tags = []string{strings.Repeat("t", 33)} }), "model.tags"},
		{"create model: too many tags", createModel(func(m *aiv1.Model) {
			m.Tags = nil
			for i := range 21 {
				m.Tags = append(m.Tags, strings.Repeat("t", i+1))
			}
		}), "model.tags"},
		{"create model: reasoning embedding model", createModel(func(m *aiv1.Model) { m.SupportsReasoning, m.EmbeddingDimensions = true, 1536 }), "model.supports_reasoning"},
		{"create model: reasoning with the embedding tag", createModel(func(m *aiv1.Model) { m.SupportsReasoning, m.Tags = true, []string{"embedding"} }), "model.supports_reasoning"},
		// UpdateModel
		{"update model: missing model", updateModel(m.Id, nil, "tier"), "model"},
		{"update model: no mask, no field set", updateModel(m.Id, &aiv1.Model{Id: m.Id}), "update_mask"},
		{"update model: provider_id in mask", updateModel(m.Id, &aiv1.Model{ProviderId: p.Id}, "provider_id"), "update_mask"},
		{"update model: unknown path", updateModel(m.Id, &aiv1.Model{}, "create_time"), "update_mask"},
		{"update model: garbage id", updateModel("zz", &aiv1.Model{Tier: 1}, "tier"), "id"},
		{"update model: body names another", updateModel(m.Id, &aiv1.Model{Id: regMissingID, Tier: 1}, "tier"), "model.id"},
		{"update model: garbage provider_id", updateModel(m.Id, &aiv1.Model{ProviderId: "zz", Tier: 1}, "tier"), "model.provider_id"},
		{"update model: tier 0", updateModel(m.Id, &aiv1.Model{}, "tier"), "model.tier"},
		{"update model: empty name", updateModel(m.Id, &aiv1.Model{}, "name"), "model.name"},
		{"update model: bad tag", updateModel(m.Id, &aiv1.Model{Tags: []string{"a b"}}, "tags"), "model.tags"},
		{"update model: negative price", updateModel(m.Id, &aiv1.Model{OutputMicrosPerMtok: -5}, "output_micros_per_mtok"), "model.output_micros_per_mtok"},
		{"update model: reasoning on an embedding model", updateModel(m.Id, &aiv1.Model{SupportsReasoning: true, EmbeddingDimensions: 768},
			"supports_reasoning", "embedding_dimensions"), "model.supports_reasoning"},
		{"update model: a reasoning model made an embedding one", updateModel(r.Id, &aiv1.Model{Tags: []string{"embedding"}}, "tags"), "model.supports_reasoning"},
		// DeleteModel
		{"delete model: garbage id", func() error { _, err := c.DeleteModel(ctx, &aiv1.DeleteModelRequest{Id: "{x}"}); return err }, "id"},
		// SelectModel
		{"select: complexity 11", selectModel(&aiv1.SelectModelRequest{Complexity: 11}), "complexity"},
		{"select: negative complexity", selectModel(&aiv1.SelectModelRequest{Complexity: -1}), "complexity"},
		{"select: bad tag", selectModel(&aiv1.SelectModelRequest{Tags: []string{"CODING"}}), "tags"},
		{"select: budget mode", selectModel(&aiv1.SelectModelRequest{BudgetMode: 9}), "budget_mode"},
		{"select: negative context", selectModel(&aiv1.SelectModelRequest{MinContextWindow: -1}), "min_context_window"},
		{"select: garbage exclusion", selectModel(&aiv1.SelectModelRequest{ExcludeModelIds: []string{"x"}}), "exclude_model_ids"},
		{"select: too many exclusions", selectModel(&aiv1.SelectModelRequest{ExcludeModelIds: make([]string, 101)}), "exclude_model_ids"},
		// GetUsage
		{"usage: unspecified group_by", getUsage(&aiv1.GetUsageRequest{GroupBy: []aiv1.UsageGroupBy{0}}), "group_by"},
		{"usage: undefined group_by", getUsage(&aiv1.GetUsageRequest{GroupBy: []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY, 99}}), "group_by"},
		{"usage: end before start", getUsage(&aiv1.GetUsageRequest{StartTime: ts(t0), EndTime: ts(t0.Add(-1))}), "end_time"},
		{"usage: invalid start", getUsage(&aiv1.GetUsageRequest{StartTime: &timestamppb.Timestamp{Nanos: -1}}), "start_time"},
		{"usage: garbage model_id", getUsage(&aiv1.GetUsageRequest{ModelId: "m"}), "model_id"},
		{"usage: bad repo", getUsage(&aiv1.GetUsageRequest{Repo: "nope"}), "repo"},
		{"usage: undefined phase", getUsage(&aiv1.GetUsageRequest{Phase: 77}), "phase"},
		{"usage: long job_id", getUsage(&aiv1.GetUsageRequest{JobId: strings.Repeat("j", 201)}), "job_id"},
		{"usage: long rpc", getUsage(&aiv1.GetUsageRequest{Rpc: strings.Repeat("r", 65)}), "rpc"},
		// ListUsageRecords
		{"records: page_size", listUsage(&aiv1.ListUsageRecordsRequest{PageSize: 201}), "page_size"},
		{"records: forged token", listUsage(&aiv1.ListUsageRecordsRequest{PageToken: forged}), "page_token"},
		{"records: end before start", listUsage(&aiv1.ListUsageRecordsRequest{StartTime: ts(t0), EndTime: ts(t0.Add(-1))}), "end_time"},
		{"records: invalid end", listUsage(&aiv1.ListUsageRecordsRequest{EndTime: &timestamppb.Timestamp{Seconds: -1 << 40}}), "end_time"},
		{"records: long task_id", listUsage(&aiv1.ListUsageRecordsRequest{TaskId: strings.Repeat("t", 201)}), "task_id"},
		{"records: garbage model_id", listUsage(&aiv1.ListUsageRecordsRequest{ModelId: "x"}), "model_id"},
		{"records: undefined phase", listUsage(&aiv1.ListUsageRecordsRequest{Phase: -3}), "phase"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			regWantInvalid(t, tc.call(), tc.field)
		})
	}
}

// withOwnDeadline is ctx's outgoing metadata (the caller's token) on a context whose
// deadline, 2 minutes away, is counted from now.
func withOwnDeadline(t *testing.T, ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	c, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
