package main

import (
	"io"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/internal/s3test"
)

// TestValidateUploadsEvidenceToS3 is issue 5's "done when": with evidence on
// and the S3 settings pointing at a real S3 server on loopback, gilf
// validate on a failing repository uploads the evidence, and the printed
// review links the failed step to an object of at most 256 KiB whose head
// and tail are the real output's.
func TestValidateUploadsEvidenceToS3(t *testing.T) {
	const bucket = "gilf-evidence"
	srv := s3test.Start(t, bucket)
	// The test prints a recognisable head, 600 KB of filler and a tail, then
	// fails: the body must keep both ends and cut the middle.
	dir := copyHello(t, map[string]string{
		"test/loud.test.js": "'use strict';\nconst test = require('node:test');\n" +
			"test('loud failure', () => {\n  process.stdout.write('HEAD-OF-OUTPUT\\n');\n" +
			"  for (let i = 0; i < 6000; i++) process.stdout.write('filler line ' + i + ' ' + 'x'.repeat(88) + '\\n');\n" +
			"  process.stdout.write('TAIL-OF-OUTPUT\\n');\n  throw new Error('boom at the end');\n});\n",
	})
	r := gilf(t, []string{
		"GILF_EVIDENCE_ARTIFACTS=1",
		"GILF_EVIDENCE_S3_BUCKET=" + bucket,
		"GILF_EVIDENCE_S3_ENDPOINT=" + srv.Endpoint(),
		"GILF_EVIDENCE_S3_REGION=" + s3test.Region,
		"GILF_EVIDENCE_S3_PATH_STYLE=1",
		"GILF_EVIDENCE_S3_PREFIX=ci",
		"GILF_EVIDENCE_PUBLIC_BASE_URL=" + srv.Endpoint() + "/" + bucket,
		"AWS_ACCESS_KEY_ID=" + srv.Access,
		"AWS_SECRET_ACCESS_KEY=" + srv.Secret,
	}, "validate", dir)
	r.want(t, exitFailed, "loud failure", "test-output")

	// Every evidence link of the review points into the bucket.
	links := regexp.MustCompile(regexp.QuoteMeta(srv.Endpoint()+"/"+bucket+"/")+`([^)\s"]+)`).FindAllStringSubmatch(r.stdout, -1)
	if len(links) == 0 {
		t.Fatalf("review links no evidence:\n%s", r.stdout)
	}
	var testBody string
	for _, l := range links {
		key, err := url.PathUnescape(l[1])
		if err != nil {
			t.Fatalf("link %q: %v", l[0], err)
		}
		if !strings.HasPrefix(key, "ci/review-artifacts/") {
			t.Errorf("key %q is outside the configured prefix", key)
		}
		out, err := srv.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %q: %v", key, err)
		}
		body, err := io.ReadAll(out.Body)
		if cerr := out.Body.Close(); err != nil || cerr != nil {
			t.Fatalf("read %q: %v %v", key, err, cerr)
		}
		if len(body) > evidence.DefaultBodyBudget {
			t.Errorf("object %q is %d bytes, over the %d budget", key, len(body), evidence.DefaultBodyBudget)
		}
		if strings.Contains(key, "/test-output/") {
			testBody = string(body)
		}
	}
	if testBody == "" {
		t.Fatalf("no test-output object among %d links:\n%s", len(links), r.stdout)
	}
	for _, want := range []string{"HEAD-OF-OUTPUT", "TAIL-OF-OUTPUT", "boom at the end", "bytes omitted"} {
		if !strings.Contains(testBody, want) {
			t.Errorf("test-output object lacks %q (head and tail must both be kept)", want)
		}
	}
	if strings.Contains(testBody, "filler line 3000 ") {
		t.Error("the middle of the output was kept: the body was not cut")
	}
}
