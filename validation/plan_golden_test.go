package validation

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

var updatePlanGolden = flag.Bool("update-plan", false, "rewrite testdata/plan golden files")

// TestPlanGolden keeps the whole plan of every corpus manifest (argv, notes,
// reasons, JSON names) in testdata/plan/<file>, so any change to what gilf
// would run shows up in review. Rewrite with -update-plan.
func TestPlanGolden(t *testing.T) {
	for _, row := range readCorpusIndex(t) {
		t.Run(row.file, func(t *testing.T) {
			data, err := os.ReadFile(shared.Data(t, "package-json", row.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(PlanFromManifest(data, row.files, PlanOptions{}), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "plan", strings.TrimSuffix(row.file, ".json")+".plan.json")
			if *updatePlanGolden {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-plan to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("plan differs from %s (-want +got):\n%s", golden, cmp.Diff(string(want), string(got)))
			}
		})
	}
}
