package openai

import (
	"context"
	"slices"

	oai "github.com/openai/openai-go/v3"
)

// ListModels lists the model ids the endpoint of cfg serves (GET
// <baseURL>/models, bearer auth when cfg has a key), sorted. Only BaseURL,
// APIKey, MaxRetries and HTTPClient are used; the caller sets the deadline.
func ListModels(ctx context.Context, cfg Config) ([]string, error) {
	svc := oai.NewModelService(requestOptions(cfg)...)
	page, err := svc.List(ctx)
	if err != nil {
		return nil, wrapErr("list models", err)
	}
	ids := make([]string, 0, len(page.Data))
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids, nil
}
