package anthropic

import (
	"context"
	"fmt"
	"slices"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// listTimeout bounds a model listing, retries included.
const listTimeout = 15 * time.Second

// ListModels returns the ids of the models the endpoint lists (GET
// <base>/v1/models with x-api-key and anthropic-version), sorted, following
// the pages. cfg.Model is not needed. Falling back to a preset's list is the
// caller's business.
func ListModels(ctx context.Context, cfg Config) ([]string, error) {
	client, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("list anthropic models: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var ids []string
	seen := map[string]bool{}
	pager := client.Models.ListAutoPaging(ctx, sdk.ModelListParams{Limit: param.NewOpt[int64](1000)})
	for pager.Next() {
		id := pager.Current().ID
		if seen[id] {
			// A server that ignores after_id would page forever.
			break
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if err := pager.Err(); err != nil {
		return nil, fmt.Errorf("list anthropic models: %w", statusError(err))
	}
	slices.Sort(ids)
	return ids, nil
}
