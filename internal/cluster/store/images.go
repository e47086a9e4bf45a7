package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// NodeImage is one image as one node holds it: its digest, the tags
// that name it there and its size.
type NodeImage struct {
	Node    string    `json:"-"`
	Digest  string    `json:"digest"`
	Tags    []string  `json:"tags"`
	Size    int64     `json:"size"`
	Updated time.Time `json:"-"`
}

// imageGrace spares a row recorded by a control plane (a build or pull
// it relayed) from a heartbeat whose list was taken before it.
const imageGrace = 30 * time.Second

// ReportImages records what node id (proving itself with its
// credential's hash) holds: its images, replacing the ones it listed
// before (an image it no longer lists goes once its row is older than
// imageGrace), and its ready warm sandboxes by "runtime/image" (WarmKey).
// Nodes call it with each heartbeat: the node's store stays the truth,
// so deletes and prunes made on the node directly show too.
func (s *Store) ReportImages(ctx context.Context, id, credHash string, imgs []NodeImage, warm map[string]int) error {
	if imgs == nil {
		imgs = []NodeImage{}
	}
	if warm == nil {
		warm = map[string]int{}
	}
	list, err := json.Marshal(imgs)
	if err != nil {
		return err
	}
	digests := make([]string, len(imgs))
	for i, img := range imgs {
		digests[i] = img.Digest
	}
	err = retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM nodes WHERE id = $1 AND credential_hash = $2)`, id, credHash).Scan(&ok); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: node %s is not registered with this credential", errdefs.ErrNotFound, id)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM node_warm WHERE node_id = $1`, id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO node_warm (node_id, key, ready)
				SELECT $1, key, value::int FROM jsonb_each_text($2) WHERE value::int > 0`, id, warm); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO node_images (node_id, digest, tags, size)
				SELECT $1, x.digest, coalesce(x.tags, '{}'), coalesce(x.size, 0) FROM jsonb_to_recordset($2) AS x(digest text, tags text[], size bigint)`+
				upsertImage, id, list); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM node_images WHERE node_id = $1 AND NOT (digest = ANY($2))
				AND updated_at < now() - $3 * interval '1 second'`, id, digests, seconds(imageGrace))
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("recording node %s's images: %w", id, err)
	}
	return nil
}

// upsertImage ends an insert into node_images: a row that is there
// already changes (and its updated_at with it) only when its tags or
// size did, so a heartbeat listing the same images writes nothing.
const upsertImage = ` ON CONFLICT (node_id, digest) DO UPDATE SET tags = EXCLUDED.tags, size = EXCLUDED.size, updated_at = now()
	WHERE node_images.tags IS DISTINCT FROM EXCLUDED.tags OR node_images.size <> EXCLUDED.size`

// RecordImage records that node holds img now: a control plane calls it
// when a build, pull or import it relayed to the node succeeded, so a
// create right after finds it before the node's next heartbeat.
func (s *Store) RecordImage(ctx context.Context, img NodeImage) error {
	if img.Tags == nil {
		img.Tags = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO node_images (node_id, digest, tags, size) VALUES ($1, $2, $3, $4)`+upsertImage,
		img.Node, img.Digest, img.Tags, img.Size)
	if err != nil {
		return fmt.Errorf("recording image %s on node %s: %w", img.Digest, img.Node, err)
	}
	return nil
}

// ForgetImage records that node no longer holds image digest.
func (s *Store) ForgetImage(ctx context.Context, node, digest string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM node_images WHERE node_id = $1 AND digest = $2`, node, digest)
	return err
}

// Images lists every image row, by digest then node.
func (s *Store) Images(ctx context.Context) ([]NodeImage, error) {
	return s.queryImages(ctx, `SELECT node_id, digest, tags, size, updated_at FROM node_images ORDER BY digest, node_id`)
}

// ImageHolders resolves ref (a digest, or a normalized name:tag) in the
// cluster: the ready nodes that hold the image it names, newest row
// first. A tag that names different images on different nodes names the
// one tagged most recently. ErrNotFound when no ready node holds it.
func (s *Store) ImageHolders(ctx context.Context, ref string) ([]NodeImage, error) {
	out, err := s.queryImages(ctx, `WITH pick AS (
			SELECT i.digest FROM node_images i JOIN nodes n ON n.id = i.node_id
			WHERE n.state = 'ready' AND (i.digest = $1 OR $1 = ANY(i.tags))
			ORDER BY i.digest = $1 DESC, i.updated_at DESC LIMIT 1)
		SELECT i.node_id, i.digest, i.tags, i.size, i.updated_at FROM node_images i JOIN nodes n ON n.id = i.node_id
		WHERE n.state = 'ready' AND i.digest = (SELECT digest FROM pick)
		ORDER BY i.updated_at DESC`, ref)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: image %s is on no ready node of the cluster", errdefs.ErrNotFound, ref)
	}
	return out, nil
}

func (s *Store) queryImages(ctx context.Context, q string, args ...any) ([]NodeImage, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's images: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeImage, error) {
		var img NodeImage
		err := r.Scan(&img.Node, &img.Digest, &img.Tags, &img.Size, &img.Updated)
		return img, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's images: %w", err)
	}
	return out, nil
}

// WarmKey is the key under which nodes report warm sandboxes of image on
// runtime, and placement looks for them.
func WarmKey(runtime, image string) string { return runtime + "/" + image }

// ImageRows are the rows on ready nodes whose digest or a tag is ref.
func (s *Store) ImageRows(ctx context.Context, ref string) ([]NodeImage, error) {
	return s.queryImages(ctx, `SELECT i.node_id, i.digest, i.tags, i.size, i.updated_at FROM node_images i JOIN nodes n ON n.id = i.node_id
		WHERE n.state = 'ready' AND (i.digest = $1 OR $1 = ANY(i.tags)) ORDER BY i.node_id`, ref)
}

// UntagImage records that node no longer has the tag ref.
func (s *Store) UntagImage(ctx context.Context, node, ref string) error {
	_, err := s.pool.Exec(ctx, `UPDATE node_images SET tags = array_remove(tags, $2), updated_at = now()
		WHERE node_id = $1 AND $2 = ANY(tags)`, node, ref)
	return err
}
