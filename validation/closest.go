package validation

import "strings"

// MaxEditDistanceInput bounds the words EditDistance compares: a longer
// one is taken as this far from anything, so hostile input costs nothing.
const MaxEditDistanceInput = 128

// EditDistance is the Levenshtein distance of a and b, in bytes.
func EditDistance(a, b string) int {
	if len(a) > MaxEditDistanceInput || len(b) > MaxEditDistanceInput {
		return MaxEditDistanceInput
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest is the word of known nearest to word, ignoring case (the first
// on a tie), with its distance; "" and -1 when known is empty. It is the
// "did you mean" of a misspelled setting or key.
func Closest(word string, known []string) (string, int) {
	best, bestD := "", -1
	w := strings.ToLower(word)
	for _, k := range known {
		if d := EditDistance(w, strings.ToLower(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD
}
