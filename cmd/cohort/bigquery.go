package main

import (
	"context"
	"errors"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

func openBigQuery(context.Context, *core) (warehouse.Writer, error) {
	return nil, errors.New("the BigQuery warehouse adapter is not built yet: set COHORT_WAREHOUSE=postgres")
}
