package evidence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// probeDir is where FSStore.Probe writes its probe file: a dot name no
// generated key uses.
const probeDir = ".gilf-probe"

// Probe checks that the directory takes a write: it creates a small probe
// file under the prefix and removes it again. Nothing of it is left.
func (s *FSStore) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	dir := s.prefix + probeDir
	name := dir + "/" + hex.EncodeToString(rnd[:])
	if err := s.root.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("fs evidence probe: %w", err)
	}
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("fs evidence probe: %w", err)
	}
	_, werr := f.Write([]byte("gilf doctor probe\n"))
	if werr == nil {
		werr = f.Sync()
	}
	werr = errors.Join(werr, f.Close(), s.root.Remove(name), s.root.Remove(dir))
	if werr != nil {
		return fmt.Errorf("fs evidence probe: %w", werr)
	}
	return nil
}

// Probe checks that the bucket answers with the configured credentials
// (HeadBucket). It writes nothing: evidence buckets are often write-once,
// and a probe object gilf could not delete would stay.
func (s *S3Store) Probe(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.opts.Bucket)}); err != nil {
		return fmt.Errorf("s3 evidence probe: head bucket %s: %w", s.opts.Bucket, err)
	}
	return nil
}
