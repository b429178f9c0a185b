package evidence

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Reading stored evidence back, for the dashboard's links: the
// filesystem store opens the file, the S3 store presigns a GET.

// MaxPresignGet bounds PresignGet's lifetime: a link the dashboard makes
// for a click, not one to keep.
const MaxPresignGet = time.Hour

// Open opens the object stored under key (the reference's Key, prefix
// included). A key that is not a stored object is an error matching
// fs.ErrNotExist; a key that is not valid (ValidKey) one matching
// fs.ErrInvalid. The caller closes the reader.
func (s *FSStore) Open(key string) (io.ReadCloser, error) {
	if err := ValidKey(key); err != nil {
		return nil, fmt.Errorf("fs evidence open: %w: %w", fs.ErrInvalid, err)
	}
	f, err := s.root.Open(key)
	if err != nil {
		return nil, fmt.Errorf("fs evidence open: %w", err)
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a stored object: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fs evidence open: %w", err)
	}
	return f, nil
}

// PresignGet returns a URL that GETs the object under key (the
// reference's Key, prefix included) for ttl, at most MaxPresignGet. It
// signs locally and does not ask the server whether the object exists.
// A key that is not valid (ValidKey) is an error matching fs.ErrInvalid.
func (s *S3Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("s3 evidence presign: %w: %w", fs.ErrInvalid, err)
	}
	if ttl <= 0 || ttl > MaxPresignGet {
		return "", fmt.Errorf("s3 evidence presign: lifetime %s is outside (0, %s]", ttl, MaxPresignGet)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("s3 evidence presign %s: %w", key, err)
	}
	return req.URL, nil
}
