// Package linear is a client for Linear's GraphQL API (linear.app) and a verifier for its
// webhooks: the building blocks of TheFold's two-way Linear sync. It reads the viewer, the
// teams with their workflow states and the issues (with the relations that make blocked-by
// edges), moves an issue to another state and comments on it.
//
// It speaks plain JSON over net/http: every operation is a named constant GraphQL
// document, so a recorded request says which operation it was. Errors are typed:
// ErrUnauthorized for a key Linear refuses, *RateLimitError with the reset time when
// Linear throttles, IsRetryable for what is worth sending again. The API key is sent as
// Linear personal keys are (the Authorization header, no "Bearer") and never appears in
// an error.
package linear

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// DefaultBaseURL is Linear's GraphQL endpoint, used when Client.BaseURL is empty.
const DefaultBaseURL = "https://api.linear.app/graphql"

// maxResponseBytes bounds how much of an answer is read: a page of issues with long
// descriptions is well under it, a runaway or hostile answer is cut off.
const maxResponseBytes = 4 << 20

// Client calls Linear's GraphQL API. The zero value is not usable: APIKey is required.
// A Client is safe for concurrent use.
type Client struct {
	// BaseURL is the GraphQL endpoint; empty means DefaultBaseURL. Tests point it at a fake.
	BaseURL string
	// APIKey is a Linear personal API key, sent as the Authorization header.
	APIKey string
	// HTTP sends the requests; nil means http.DefaultClient. Deadlines come from the
	// context given to each call.
	HTTP *http.Client
}

// gqlRequest is the body of every request.
type gqlRequest struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables,omitempty"`
	OperationName string         `json:"operationName"`
}

// gqlResponse is the envelope of every answer.
type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// gqlError is one entry of a GraphQL errors list; Linear puts its error kind in
// extensions.code.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// do sends the operation named op (whose document is doc) with vars and decodes its data
// into out.
func (c *Client) do(ctx context.Context, op, doc string, vars map[string]any, out any) error {
	resp, err := c.send(ctx, op, doc, vars)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body)
	if err != nil {
		return fmt.Errorf("linear: %s: read response: %w", op, err)
	}
	if err := statusError(op, resp); err != nil {
		return err
	}
	var env gqlResponse
	if err := json.Unmarshal(body, &env); err != nil {
		if resp.StatusCode != http.StatusOK {
			return &StatusError{Operation: op, StatusCode: resp.StatusCode}
		}
		return fmt.Errorf("linear: %s: decode response: %w", op, err)
	}
	if len(env.Errors) > 0 {
		return graphQLErrors(op, resp.Header, env.Errors)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Operation: op, StatusCode: resp.StatusCode}
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("linear: %s: decode data: %w", op, err)
	}
	return nil
}

// send posts the request. A failure to reach Linear is a transport error (worth retrying)
// unless the context ended, which the caller asked for.
func (c *Client) send(ctx context.Context, op, doc string, vars map[string]any) (*http.Response, error) {
	payload, err := json.Marshal(gqlRequest{Query: doc, Variables: vars, OperationName: op})
	if err != nil {
		return nil, fmt.Errorf("linear: %s: encode request: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL(), bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("linear: %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", c.APIKey)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("linear: %s: %w", op, ctxErr)
		}
		return nil, &transportError{op: op, err: err}
	}
	return resp, nil
}

func (c *Client) baseURL() string {
	if c.BaseURL == "" {
		return DefaultBaseURL
	}
	return c.BaseURL
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

// readLimited reads a whole answer, refusing one larger than maxResponseBytes.
func readLimited(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxResponseBytes {
		return nil, fmt.Errorf("answer larger than %d bytes", maxResponseBytes)
	}
	return body, nil
}

// pageInfo is a connection's paging state.
type pageInfo struct {
	HasNextPage bool   `json:"hasNextPage"`
	EndCursor   string `json:"endCursor"`
}

// collectPages calls fetch with the cursor of each page until the last one and returns
// every item. A page that says there is more but gives no new cursor is an error, not an
// endless loop.
func collectPages[T any](fetch func(after string) ([]T, pageInfo, error)) ([]T, error) {
	var all []T
	after := ""
	for {
		items, page, err := fetch(after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if !page.HasNextPage {
			return all, nil
		}
		if page.EndCursor == "" || page.EndCursor == after {
			return nil, errors.New("linear: a page claims more results but gives no new cursor")
		}
		after = page.EndCursor
	}
}
