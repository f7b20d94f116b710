package main

import (
	"github.com/rpdhq/rpd/reconcile"
)

// jsonPlanFormat is the format_version of the -json plan document. The
// minor version grows with additive changes; the major one with breaking
// ones.
const jsonPlanFormat = "1.0"

// jsonPlan is the -json document of rpd plan and rpd show, documented in
// docs/plan.md.
type jsonPlan struct {
	FormatVersion   string            `json:"format_version"`
	Stack           string            `json:"stack"`
	RefreshOnly     bool              `json:"refresh_only"`
	Targets         []string          `json:"targets,omitempty"`
	ResourceChanges []jsonChange      `json:"resource_changes"`
	Drift           []jsonChange      `json:"drift"`
	Warnings        []jsonWarning     `json:"warnings"`
	Summary         reconcile.Summary `json:"summary"`
	Changes         bool              `json:"changes"`
	// Destroy marks a destroy plan; LeaseRecords counts the recorded
	// grants it removes.
	Destroy      bool `json:"destroy,omitempty"`
	LeaseRecords int  `json:"lease_records,omitempty"`
	// Diagnostics are the configuration's warnings.
	Diagnostics []jsonDiagnostic `json:"diagnostics,omitempty"`
}

type jsonChange struct {
	Address string         `json:"address"`
	Type    string         `json:"type"`
	Name    string         `json:"name"`
	Change  jsonChangeBody `json:"change"`
}

type jsonChangeBody struct {
	Actions      []string         `json:"actions"`
	Before       reconcile.Values `json:"before"`
	After        reconcile.Values `json:"after"`
	ReplacePaths [][]string       `json:"replace_paths"`
}

type jsonWarning struct {
	Address string `json:"address"`
	Summary string `json:"summary"`
}

func jsonPlanOf(p *reconcile.Plan) jsonPlan {
	out := jsonPlan{
		FormatVersion:   jsonPlanFormat,
		Stack:           p.Stack,
		RefreshOnly:     p.RefreshOnly,
		ResourceChanges: []jsonChange{},
		Drift:           []jsonChange{},
		Warnings:        []jsonWarning{},
		Summary:         p.Summary(),
		Changes:         p.HasChanges(),
		Destroy:         p.Destroy,
		LeaseRecords:    p.LeaseRecords,
	}
	for _, t := range p.Targets {
		out.Targets = append(out.Targets, t.String())
	}
	for _, c := range p.Changes {
		rp := c.ReplacePaths
		if rp == nil {
			rp = [][]string{}
		}
		out.ResourceChanges = append(out.ResourceChanges, jsonChange{
			Address: c.Address.String(), Type: string(c.Address.Type), Name: c.Address.Name,
			Change: jsonChangeBody{Actions: c.Action.Actions(), Before: c.Before, After: c.After, ReplacePaths: rp},
		})
	}
	for _, d := range p.Drift {
		act := []string{"update"}
		if d.After == nil {
			act = []string{"delete"}
		}
		out.Drift = append(out.Drift, jsonChange{
			Address: d.Address.String(), Type: string(d.Address.Type), Name: d.Address.Name,
			Change: jsonChangeBody{Actions: act, Before: d.Before, After: d.After, ReplacePaths: [][]string{}},
		})
	}
	for _, w := range p.Warnings {
		out.Warnings = append(out.Warnings, jsonWarning{Address: w.Address.String(), Summary: w.Summary})
	}
	return out
}
