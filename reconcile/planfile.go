package reconcile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadPlanFile: a saved plan is corrupted, was edited, or was written by
// an rpd whose plan format this one does not read.
var ErrBadPlanFile = errors.New("invalid saved plan")

// EncodePlan renders p as a saved plan: indented JSON with a checksum over
// its content, so that a truncated or edited file is refused.
func EncodePlan(p *Plan) ([]byte, error) {
	c := *p
	c.Checksum = ""
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	c.Checksum = checksum(body)
	out, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return append(out, '\n'), nil
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DecodePlan reads a saved plan written by EncodePlan. Errors wrap
// ErrBadPlanFile and say what to do.
func DecodePlan(b []byte) (*Plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s; make a new one with rpd plan -out FILE", ErrBadPlanFile, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		var probe struct {
			FormatVersion int `json:"format_version"`
		}
		if json.Unmarshal(b, &probe) == nil && probe.FormatVersion > PlanFormat {
			return nil, bad("format_version %d was written by a newer rpd (this one reads %d)", probe.FormatVersion, PlanFormat)
		}
		return nil, bad("not a plan file rpd can read (%v)", err)
	}
	if dec.More() {
		return nil, bad("trailing data after the plan")
	}
	switch {
	case p.FormatVersion != PlanFormat:
		return nil, bad("format_version %d, this rpd reads %d", p.FormatVersion, PlanFormat)
	case p.Checksum == "":
		return nil, bad("no checksum")
	case p.Stack == "" || p.Desired == nil:
		return nil, bad("it names no stack or desired state")
	case p.Desired.Stack != p.Stack:
		return nil, bad("its desired state is for stack %q, not %q", p.Desired.Stack, p.Stack)
	}
	want := p.Checksum
	p.Checksum = ""
	body, err := json.Marshal(&p)
	if err != nil {
		return nil, bad("cannot re-encode it (%v)", err)
	}
	if checksum(body) != want {
		return nil, bad("checksum mismatch: the file was corrupted or edited")
	}
	p.Checksum = want
	p.Desired.fillMaps()
	if p.LiveQueues == nil {
		p.LiveQueues = map[string]QueueEntry{}
	}
	if p.Fingerprints == nil {
		p.Fingerprints = map[string]string{}
	}
	return &p, nil
}
