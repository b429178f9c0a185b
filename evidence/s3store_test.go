package evidence

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gilf-review/gilf/internal/s3test"
	"github.com/gilf-review/gilf/validation"
)

// s3Server is a real S3 server (versitygw, posix backend) on loopback.
type s3Server struct{ *s3test.Server }

func startS3(t *testing.T, bucket string) *s3Server { return &s3Server{s3test.Start(t, bucket)} }

func (s *s3Server) endpoint() string { return s.Endpoint() }
func (s *s3Server) stop()            { s.Stop() }

func (s *s3Server) store(t *testing.T, bucket string, mod func(*S3Options)) *S3Store {
	t.Helper()
	opts := S3Options{
		Bucket:         bucket,
		Endpoint:       s.endpoint(),
		Region:         DefaultS3Region,
		PathStyle:      true,
		Credentials:    s.Credentials(),
		MaxPutAttempts: 3,
		RetryBackoff:   10 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	st, err := NewS3Store(t.Context(), opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// rawClient reads back what the server holds, independently of S3Store.
func (s *s3Server) rawClient() *s3.Client { return s.Client() }

func getObject(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer func() {
		if err := out.Body.Close(); err != nil {
			t.Error(err)
		}
	}()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS3Store(t *testing.T) {
	const bucket = "gilf-evidence"
	srv := startS3(t, bucket)
	raw := srv.rawClient()
	scope := Scope{Repo: "octo/hello", SHA: "0123abcd", Review: "job-7"}

	t.Run("upload with headers as stored", func(t *testing.T) {
		st := srv.store(t, bucket, func(o *S3Options) { o.Prefix = "prod" })
		tests := []struct {
			name, contentType string
			kind              Kind
			body              []byte
		}{
			{"test.log", ContentTypeText, KindTestOutput, []byte("1 failing\n")},
			{"shot.png", ContentTypeBinary, KindScreenshot, []byte("\x89PNG\r\n\x1a\n\x00")},
		}
		for _, tt := range tests {
			key := testKey(t, scope, tt.kind, tt.name)
			ref, err := st.Put(t.Context(), Object{Key: key, Kind: tt.kind, ContentType: tt.contentType, Body: tt.body})
			if err != nil {
				t.Fatal(err)
			}
			if ref.Key != "prod/"+key || ref.Kind != string(tt.kind) || ref.URL != "" {
				t.Fatalf("ref = %+v", ref)
			}
			head, err := raw.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(ref.Key)})
			if err != nil {
				t.Fatal(err)
			}
			if got := aws.ToString(head.ContentType); got != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tt.contentType)
			}
			if got, want := aws.ToString(head.ContentDisposition), `attachment; filename=`+tt.name; got != want {
				t.Errorf("Content-Disposition = %q, want %q", got, want)
			}
			if got := head.Metadata[MetaSHA256]; got != bodySHA256(tt.body) {
				t.Errorf("sha256 metadata = %q", got)
			}
			if got := getObject(t, raw, bucket, ref.Key); !bytes.Equal(got, tt.body) {
				t.Errorf("stored body = %q", got)
			}
		}
	})

	t.Run("conditional re-upload", func(t *testing.T) {
		st := srv.store(t, bucket, nil)
		key := testKey(t, scope, KindLog, "install.log")
		obj := Object{Key: key, Kind: KindLog, ContentType: ContentTypeText, Body: []byte("original")}
		if _, err := st.Put(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		// A retried job uploads the same bytes: already stored.
		if ref, err := st.Put(t.Context(), obj); err != nil || ref.Key != key {
			t.Fatalf("identical re-put = %+v, %v", ref, err)
		}
		// Different bytes never replace what is stored.
		obj.Body = []byte("overwrite attempt")
		if _, err := st.Put(t.Context(), obj); !errors.Is(err, ErrKeyConflict) {
			t.Fatalf("conflicting put: %v, want ErrKeyConflict", err)
		}
		if got := getObject(t, raw, bucket, key); string(got) != "original" {
			t.Fatalf("object now %q", got)
		}
	})

	t.Run("hostile repo and file names stay under the prefix", func(t *testing.T) {
		st := srv.store(t, bucket, func(o *S3Options) { o.Prefix = "tenant-a" })
		hostileScope := Scope{Repo: "../../tenant-b/x", SHA: "..", Review: "%2F..%2F"}
		names := []string{"../../../etc/passwd", "evidence/other-tenant/", "a b?c#d", "😀\u202e.log", "%h"}
		for _, name := range names {
			key := testKey(t, hostileScope, KindLog, name)
			ref, err := st.Put(t.Context(), Object{Key: key, Kind: KindLog, ContentType: ContentTypeText, Body: []byte(name)})
			if err != nil {
				t.Fatalf("put %q: %v", name, err)
			}
			if !strings.HasPrefix(ref.Key, "tenant-a/review-artifacts/") {
				t.Fatalf("key %q left the prefix", ref.Key)
			}
			if got := getObject(t, raw, bucket, ref.Key); string(got) != name {
				t.Fatalf("stored %q under %q", got, ref.Key)
			}
		}
		list, err := raw.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, "prod/review-artifacts/") && !strings.HasPrefix(k, "review-artifacts/") &&
				!strings.HasPrefix(k, "tenant-a/review-artifacts/") {
				t.Errorf("object %q outside every prefix", k)
			}
		}
	})

	t.Run("presigned URL is fetchable", func(t *testing.T) {
		st := srv.store(t, bucket, func(o *S3Options) { o.PresignExpiry = 10 * time.Minute })
		key := testKey(t, Scope{Repo: "octo/hello", SHA: "0123abcd", Review: "job 8"}, KindBuildOutput, "build %.log")
		before := time.Now()
		ref, err := st.Put(t.Context(), Object{Key: key, Kind: KindBuildOutput, ContentType: ContentTypeText, Body: []byte("built")})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ref.URL, srv.endpoint()+"/") || !strings.Contains(ref.URL, "X-Amz-Signature=") {
			t.Fatalf("url = %q", ref.URL)
		}
		if exp := ref.URLExpiresAt; exp.Before(before.Add(9*time.Minute)) || exp.After(before.Add(11*time.Minute)) {
			t.Fatalf("expiry %v not ~10 minutes after %v", exp, before)
		}
		resp, err := http.Get(ref.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if cerr := resp.Body.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "built" {
			t.Fatalf("GET presigned = %d %q, %v", resp.StatusCode, body, err)
		}
		// Without the signature the same object is refused.
		bare, _, _ := strings.Cut(ref.URL, "?")
		resp, err = http.Get(bare)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			t.Fatal("unsigned GET succeeded: the presigned URL proves nothing")
		}
	})

	t.Run("public base URL", func(t *testing.T) {
		st := srv.store(t, bucket, func(o *S3Options) {
			o.PublicBaseURL = "https://evidence.example/gilf/"
			o.PresignExpiry = time.Minute // the public URL wins
		})
		key := testKey(t, scope, KindLintOutput, "lint 1.log")
		ref, err := st.Put(t.Context(), Object{Key: key, Kind: KindLintOutput, ContentType: ContentTypeText, Body: []byte("l")})
		if err != nil {
			t.Fatal(err)
		}
		want := "https://evidence.example/gilf/review-artifacts/octo%252Fhello/0123abcd/evidence/job-7/lint-output/lint%25201.log"
		if ref.URL != want || !ref.URLExpiresAt.IsZero() {
			t.Fatalf("ref = %+v, want url %q", ref, want)
		}
	})

	t.Run("server stopped: failure recorded, nothing attached", func(t *testing.T) {
		st := srv.store(t, bucket, nil)
		srv.stop()
		findings := []validation.Finding{{Severity: validation.SeverityHigh, Step: "test", Title: "test failed", ExecutionClaim: true}}
		arts := []Artifact{build(t, []byte("1 failing"), B)}
		start := time.Now()
		got, stored, failures := Attach(t.Context(), st, scope, findings, arts)
		if len(stored) != 0 || len(failures) != 1 {
			t.Fatalf("stored %v, failures %v", stored, failures)
		}
		if len(got[0].Evidence) != 0 {
			t.Fatalf("reference attached after a failed upload: %+v", got[0].Evidence)
		}
		f := failures[0]
		wantKey := testKey(t, scope, KindTestOutput, "test.log")
		if f.Key != wantKey || f.Step != "test" || !strings.Contains(f.Reason, "connect") {
			t.Fatalf("failure = %+v", f)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("retries took %s", time.Since(start))
		}
		if req := Require(got); req[0].EvidenceStatus != EvidenceStatusUnverified {
			t.Fatalf("require after failed upload: %+v", req[0])
		}
	})
}

func TestS3StoreRetriesAreBounded(t *testing.T) {
	// A loopback S3 endpoint that always answers 503 SlowDown.
	var calls atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		if _, err := io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`); err != nil {
			t.Error(err)
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	for _, attempts := range []int{1, 3} {
		calls.Store(0)
		st, err := NewS3Store(t.Context(), S3Options{
			Bucket: "b", Endpoint: "http://" + l.Addr().String(), PathStyle: true,
			Credentials:    credentials.NewStaticCredentialsProvider("ak", "sk", ""),
			MaxPutAttempts: attempts, RetryBackoff: time.Millisecond,
		}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Put(t.Context(), Object{Key: "review-artifacts/a/b/evidence/c/log/d", Kind: KindLog, Body: []byte("x")})
		if err == nil || int(calls.Load()) != attempts {
			t.Fatalf("MaxPutAttempts=%d: %d calls, err %v", attempts, calls.Load(), err)
		}
	}
}

func TestS3StoreCancelStopsRetrying(t *testing.T) {
	st, err := NewS3Store(t.Context(), S3Options{
		Bucket: "b", Endpoint: "http://" + s3test.FreeAddr(t), PathStyle: true,
		Credentials:    credentials.NewStaticCredentialsProvider("ak", "sk", ""),
		MaxPutAttempts: 100, RetryBackoff: time.Second,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := st.Put(ctx, Object{Key: "a/b", Kind: KindLog, Body: []byte("x")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancelled put took %s", d)
	}
}

func TestNewS3StoreValidates(t *testing.T) {
	tests := []struct {
		name string
		opts S3Options
		want string
	}{
		{"no bucket", S3Options{}, "bucket is required"},
		{"presign too long", S3Options{Bucket: "b", PresignExpiry: MaxPresignExpiry + time.Second}, "presign expiry"},
		{"presign at the limit", S3Options{Bucket: "b", PresignExpiry: MaxPresignExpiry}, ""},
		{"bad prefix", S3Options{Bucket: "b", Prefix: "../x"}, "evidence prefix"},
		{"negative attempts", S3Options{Bucket: "b", MaxPutAttempts: -1}, "max put attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Credentials = credentials.NewStaticCredentialsProvider("ak", "sk", "")
			_, err := NewS3Store(t.Context(), tt.opts, slog.New(slog.DiscardHandler))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name    string
		base    time.Duration
		attempt int
		want    time.Duration // the upper bound; the wait is in [want/2, want]
	}{
		{"first retry", 100 * time.Millisecond, 1, 100 * time.Millisecond},
		{"doubles", 100 * time.Millisecond, 3, 400 * time.Millisecond},
		{"capped", 100 * time.Millisecond, 30, MaxRetryBackoff},
		{"base over the cap", 2 * MaxRetryBackoff, 1, MaxRetryBackoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				if d := backoff(tt.base, tt.attempt); d < tt.want/2 || d > tt.want {
					t.Fatalf("backoff = %s, want within [%s, %s]", d, tt.want/2, tt.want)
				}
			}
		})
	}
}
