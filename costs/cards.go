// Package costs estimates what validation runs cost from rate cards and
// elapsed wall-clock time, and what the semantic review's model cost from
// its token counts; it guards the E2B shadow lane's monthly budget and
// aggregates spend by executor and day. Costs are estimates, not bills,
// and say so.
package costs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Executor names with built-in cards (canonical names, after alias
// resolution).
const (
	ExecutorE2B       = "managed-e2b"
	ExecutorCFSandbox = "managed-cf-sandbox"
)

// Card is a rate card: an executor's price per second of allocated
// resources, or, under a model card's key (ModelCardKey), a model's price
// per million tokens. A card holds one pair or the other.
type Card struct {
	VCPUUsdPerSec      float64 `json:"vcpuUsdPerSec"`
	MemoryGibUsdPerSec float64 `json:"memoryGibUsdPerSec"`
	InputUsdPerMTok    float64 `json:"inputUsdPerMTok"`
	OutputUsdPerMTok   float64 `json:"outputUsdPerMTok"`
}

// Cards are rate cards keyed by canonical executor name, and model cards
// keyed by ModelCardKey.
type Cards map[string]Card

// ModelPrefix starts the key of a model card.
const ModelPrefix = "model:"

// UnknownModel names the model of a semantic span whose endpoint named
// none; its key (model:unknown) is never priced and no card may claim it.
const UnknownModel = "unknown"

// ModelCardKey is the key of model's card, and the executor of its
// semantic spans: "model:" + model, the name the endpoint answered with.
func ModelCardKey(model string) string { return ModelPrefix + model }

// BuiltinCards returns a fresh copy of the built-in cards.
//
// managed-e2b: $0.000014 per vCPU-second and $0.0000045 per GiB-second of
// allocated memory. Sources, read 2026-11-30: E2B's billing docs
// (https://e2b.dev/docs/billing) bill per second for the CPU and RAM
// allocated to the sandbox and give the example "8 vCPU and 4 GB RAM costs
// $0.468 per hour"; the per-vCPU rate ($0.000014/s) is from the pricing
// page as summarised by usagepricing.com/blueprint/e2b. The memory rate is
// derived: 0.468/3600 = 8×0.000014 + 4×m gives m = 0.0000045. It matches
// the engine's documented override example. Not read from e2b.dev/pricing
// itself.
//
// managed-cf-sandbox: $0.00002 per vCPU-second and $0.0000025 per
// GiB-second. Cloudflare's Sandbox SDK pricing page
// (https://developers.cloudflare.com/sandbox/platform/pricing/) says it is
// billed at Containers rates; the rates are those of
// https://developers.cloudflare.com/containers/pricing/ as quoted by
// secondary sources read 2026-11-30 (the Containers page itself was not
// available to confirm). Since 2025-11-21 Cloudflare bills CPU by active
// use, so a wall-clock estimate at the full vCPU count is an upper bound
// for CPU; memory is billed on provisioned size as estimated here. Disk,
// egress, Workers and Durable Objects charges are not included.
//
// There are no built-in model cards: a model's price depends on its
// provider and changes, so a model without a card in
// GILF_VALIDATION_COST_RATES has a null cost, never 0.
func BuiltinCards() Cards {
	return Cards{
		ExecutorE2B:       {VCPUUsdPerSec: 0.000014, MemoryGibUsdPerSec: 0.0000045},
		ExecutorCFSandbox: {VCPUUsdPerSec: 0.00002, MemoryGibUsdPerSec: 0.0000025},
	}
}

// Merge returns a copy of c with every card of overrides replacing c's
// card for the same executor.
func (c Cards) Merge(overrides Cards) Cards {
	out := maps.Clone(c)
	if out == nil {
		out = Cards{}
	}
	maps.Copy(out, overrides)
	return out
}

// LoadCards is the built-in cards with GILF_VALIDATION_COST_RATES (raw,
// possibly empty) applied.
func LoadCards(rates string) (Cards, error) {
	over, err := ParseRates(rates)
	if err != nil {
		return nil, err
	}
	return BuiltinCards().Merge(over), nil
}

// ParseRates parses GILF_VALIDATION_COST_RATES: a JSON object keyed by
// executor, each value an object with both vcpuUsdPerSec and
// memoryGibUsdPerSec; a key that starts with "model:" (ModelCardKey) is a
// model card instead, with both inputUsdPerMTok and outputUsdPerMTok (USD
// per million tokens) and neither per-second field. An empty (or
// all-space) string means no overrides. Invalid JSON, a non-object,
// trailing data, unknown, missing or other-kind fields, and negative or
// non-finite rates are errors naming the key and field. An override
// replaces the whole card.
func ParseRates(s string) (Cards, error) {
	if strings.TrimSpace(s) == "" {
		return Cards{}, nil
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("GILF_VALIDATION_COST_RATES: invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("GILF_VALIDATION_COST_RATES: trailing data after the JSON object")
	}
	if raw == nil {
		return nil, errors.New("GILF_VALIDATION_COST_RATES: must be a JSON object keyed by executor")
	}
	cards := Cards{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		card, err := parseCard(name, raw[name])
		switch name {
		case "":
			err = errors.Join(err, errors.New("empty executor name"))
		case ModelPrefix:
			err = errors.Join(err, errors.New("empty model name"))
		case ModelCardKey(UnknownModel):
			err = errors.Join(err, errors.New("reserved for the spans of an endpoint that named no model, which are never priced"))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("GILF_VALIDATION_COST_RATES[%q]: %w", name, err))
			continue
		}
		cards[name] = card
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cards, nil
}

// Card field names, matched exactly (encoding/json alone would accept
// any letter case).
const (
	fieldVCPU   = "vcpuUsdPerSec"
	fieldMemory = "memoryGibUsdPerSec"
	fieldInput  = "inputUsdPerMTok"
	fieldOutput = "outputUsdPerMTok"
)

// parseCard parses the card under key: a model card's two token fields
// when key starts with ModelPrefix, else an executor card's two
// per-second fields.
func parseCard(key string, msg json.RawMessage) (Card, error) {
	kind, first, second := "an executor card", fieldVCPU, fieldMemory
	model := strings.HasPrefix(key, ModelPrefix)
	if model {
		kind, first, second = "a model card", fieldInput, fieldOutput
	}
	if bytes.Equal(bytes.TrimSpace(msg), []byte("null")) {
		return Card{}, errors.New("card is null")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return Card{}, fmt.Errorf("card must be an object: %w", err)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if name != first && name != second {
			errs = append(errs, fmt.Errorf("unknown field %q (%s has exactly %s and %s)", name, kind, first, second))
		}
	}
	rate := func(field string) float64 {
		raw, ok := fields[field]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: missing", field))
			return 0
		}
		var v float64
		switch err := json.Unmarshal(raw, &v); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		case math.IsNaN(v) || math.IsInf(v, 0):
			errs = append(errs, fmt.Errorf("%s: %v is not a finite number", field, v))
		case v < 0:
			errs = append(errs, fmt.Errorf("%s: %v is negative", field, v))
		}
		return v
	}
	a, b := rate(first), rate(second)
	c := Card{VCPUUsdPerSec: a, MemoryGibUsdPerSec: b}
	if model {
		c = Card{InputUsdPerMTok: a, OutputUsdPerMTok: b}
	}
	if err := errors.Join(errs...); err != nil {
		return Card{}, err
	}
	return c, nil
}
