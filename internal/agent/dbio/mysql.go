package dbio

import (
	"context"
	"errors"
	"time"
)

// mysql samples a MySQL or MariaDB server (mysql_sample.go).
type mysql struct {
	c        Config
	password func() (string, error)
	now      func() time.Time
}

func (m *mysql) sample(ctx context.Context) (Sample, error) {
	return Sample{}, errors.New("not yet")
}

func (m *mysql) close() {}
