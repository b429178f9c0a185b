package evidence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Defaults and limits of the S3 store.
const (
	// DefaultMaxPutAttempts bounds the tries of one upload (first try
	// included) on transient failures: no response, 5xx, 429, 408, 409.
	DefaultMaxPutAttempts = 4
	// DefaultRetryBackoff is the wait before the second try; it doubles
	// per try up to MaxRetryBackoff, with jitter on its upper half.
	DefaultRetryBackoff = 250 * time.Millisecond
	MaxRetryBackoff     = 5 * time.Second
	// MaxPresignExpiry is SigV4's longest presigned URL lifetime.
	MaxPresignExpiry = 7 * 24 * time.Hour
	// DefaultS3Region is used when no region is configured (R2 accepts
	// "auto"; most S3-compatible servers accept any region).
	DefaultS3Region = "us-east-1"
)

// MetaSHA256 is the user-metadata name (x-amz-meta-gilf-sha256) holding an
// object's hex SHA-256; a retried upload compares against it.
const MetaSHA256 = "gilf-sha256"

// S3Options configure an S3Store. Credentials come from the standard AWS
// chain (environment, shared config, web identity, instance role) unless
// Credentials is set.
type S3Options struct {
	Bucket string
	// Endpoint is the S3 API base URL; empty for AWS S3. For Cloudflare R2:
	// https://<account>.r2.cloudflarestorage.com.
	Endpoint string
	Region   string
	// Prefix (GILF_EVIDENCE_S3_PREFIX) is prepended to every key.
	Prefix    string
	PathStyle bool
	// PublicBaseURL, when set, makes reference URLs base + key.
	PublicBaseURL string
	// PresignExpiry, when set and PublicBaseURL is not, makes reference
	// URLs presigned GETs valid this long (at most MaxPresignExpiry).
	PresignExpiry  time.Duration
	MaxPutAttempts int
	RetryBackoff   time.Duration
	Credentials    aws.CredentialsProvider
	HTTPClient     *http.Client
}

// S3Store keeps evidence in an S3-compatible bucket (AWS S3, Cloudflare
// R2, MinIO, versitygw, …).
//
// Uploads are conditional (If-None-Match: *). When the key exists the
// server answers 412; the store then reads the object's size and
// x-amz-meta-gilf-sha256 with HeadObject: the same size and hash count as
// already stored (a retried job), anything else is ErrKeyConflict.
type S3Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	opts    S3Options
	prefix  string
	log     *slog.Logger
}

var _ Store = (*S3Store)(nil)

// NewS3Store builds a store from opts. It does not contact the server.
func NewS3Store(ctx context.Context, opts S3Options, logger *slog.Logger) (*S3Store, error) {
	var errs []error
	if opts.Bucket == "" {
		errs = append(errs, errors.New("bucket is required"))
	}
	if opts.PresignExpiry < 0 || opts.PresignExpiry > MaxPresignExpiry {
		errs = append(errs, fmt.Errorf("presign expiry %s is outside (0, %s]", opts.PresignExpiry, MaxPresignExpiry))
	}
	if opts.MaxPutAttempts < 0 {
		errs = append(errs, fmt.Errorf("max put attempts %d is negative", opts.MaxPutAttempts))
	}
	prefix, err := CleanPrefix(opts.Prefix)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("s3 evidence store: %w", err)
	}
	if opts.MaxPutAttempts == 0 {
		opts.MaxPutAttempts = DefaultMaxPutAttempts
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	if opts.Region == "" {
		opts.Region = DefaultS3Region
	}
	loads := []func(*config.LoadOptions) error{config.WithRegion(opts.Region)}
	if opts.Credentials != nil {
		loads = append(loads, config.WithCredentialsProvider(opts.Credentials))
	}
	if opts.HTTPClient != nil {
		loads = append(loads, config.WithHTTPClient(opts.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3 evidence store: aws config: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		o.Retryer = aws.NopRetryer{} // retries are ours, bounded by MaxPutAttempts
		// Checksums only where S3 requires them: not every compatible
		// server accepts the SDK's default trailing checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3Store{
		client:  client,
		presign: s3.NewPresignClient(client),
		opts:    opts,
		prefix:  prefix,
		log:     logger,
	}, nil
}

// Put uploads obj.Body under prefix+obj.Key unless the key exists.
func (s *S3Store) Put(ctx context.Context, obj Object) (validation.EvidenceRef, error) {
	if err := checkObject(obj); err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("s3 evidence put: %w", err)
	}
	key := s.prefix + obj.Key
	if err := ValidKey(key); err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("s3 evidence put: %w", err)
	}
	sha := bodySHA256(obj.Body)
	var err error
	for attempt := 1; ; attempt++ {
		err = s.putOnce(ctx, key, obj, sha)
		if err == nil || !retryable(ctx, err) || attempt >= s.opts.MaxPutAttempts {
			break
		}
		wait := backoff(s.opts.RetryBackoff, attempt)
		s.log.WarnContext(ctx, "evidence upload failed; retrying",
			logkey.Key, key, logkey.Attempt, attempt, logkey.Wait, wait, logkey.Err, err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return validation.EvidenceRef{}, fmt.Errorf("s3 evidence put %s: %w (after %v)", key, ctx.Err(), err)
		case <-t.C:
		}
	}
	if err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("s3 evidence put %s: %w", key, err)
	}
	return s.ref(ctx, obj.Kind, key), nil
}

func (s *S3Store) putOnce(ctx context.Context, key string, obj Object, sha string) error {
	ct := obj.ContentType
	if ct == "" {
		ct = ContentTypeBinary
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:             aws.String(s.opts.Bucket),
		Key:                aws.String(key),
		Body:               bytes.NewReader(obj.Body),
		ContentLength:      aws.Int64(int64(len(obj.Body))),
		ContentType:        aws.String(ct),
		ContentDisposition: aws.String(mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(key)})),
		IfNoneMatch:        aws.String("*"),
		Metadata:           map[string]string{MetaSHA256: sha},
	})
	if err == nil || !preconditionFailed(err) {
		return err
	}
	head, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.opts.Bucket),
		Key:    aws.String(key),
	})
	if herr != nil {
		return fmt.Errorf("key exists; head: %w", herr)
	}
	size := aws.ToInt64(head.ContentLength)
	if size == int64(len(obj.Body)) && head.Metadata[MetaSHA256] == sha {
		return nil // already stored by an earlier try of this job
	}
	return fmt.Errorf("%w (%d bytes, sha256 %q)", ErrKeyConflict, size, head.Metadata[MetaSHA256])
}

// ref builds the reference of a stored key: a public URL, else a presigned
// GET, else the key alone.
func (s *S3Store) ref(ctx context.Context, kind Kind, key string) validation.EvidenceRef {
	ref := validation.EvidenceRef{Kind: string(kind), Key: key}
	switch {
	case s.opts.PublicBaseURL != "":
		ref.URL = objectURL(s.opts.PublicBaseURL, key)
	case s.opts.PresignExpiry > 0:
		now := time.Now()
		req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(s.opts.Bucket),
			Key:    aws.String(key),
		}, s3.WithPresignExpires(s.opts.PresignExpiry))
		if err != nil {
			// The object is stored; only its link is missing.
			s.log.WarnContext(ctx, "evidence presign failed; reference keeps the key only", logkey.Key, key, logkey.Err, err)
			return ref
		}
		ref.URL = req.URL
		ref.URLExpiresAt = now.Add(s.opts.PresignExpiry).UTC().Truncate(time.Second)
	}
	return ref
}

func preconditionFailed(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed"
}

func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, ErrKeyConflict) {
		return false
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch c := re.HTTPStatusCode(); {
		case c == 0: // the request was never answered
			return true
		case c >= 500, c == http.StatusTooManyRequests, c == http.StatusRequestTimeout, c == http.StatusConflict:
			return true
		default:
			return false
		}
	}
	return true // no response at all: connection refused, reset, timeout
}

// backoff is the wait after the given failed attempt (1-based).
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < MaxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxRetryBackoff)
	return d/2 + rand.N(d/2+1)
}
