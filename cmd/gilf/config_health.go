package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultMinFreeBytes is GILF_MIN_FREE_BYTES's default: below 1 GiB free
// under GILF_DATA_DIR, /readyz answers 503.
const DefaultMinFreeBytes int64 = 1 << 30

// loadMinFree reads GILF_MIN_FREE_BYTES: a number of bytes, 0 turning the
// free-space check off.
func loadMinFree(getenv func(string) string, errs []error) (int64, []error) {
	v := strings.TrimSpace(getenv("GILF_MIN_FREE_BYTES"))
	if v == "" {
		return DefaultMinFreeBytes, errs
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return DefaultMinFreeBytes, append(errs, fmt.Errorf("GILF_MIN_FREE_BYTES=%q: want a number of bytes from 0 (no free-space check) to %d, e.g. 1073741824 for 1 GiB", v, int64(math.MaxInt64)))
	}
	return n, errs
}
