package control

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// silence backdates node id's heartbeat by an hour.
func silence(url, id string) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, id)
	return err
}
