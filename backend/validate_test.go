package backend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rpdhq/rpd/backend"
)

func TestValidateQueueName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"ci-prod-rp-medium", true},
		{"A_b-9", true},
		{strings.Repeat("a", 80), true},
		{"", false},
		{strings.Repeat("a", 81), false},
		{"dot.name", false},
		{"space name", false},
		{"ünï", false},
		{"q.fifo", false},
	} {
		if err := backend.ValidateQueueName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateQueueName(%q) = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestNormalizeQueueAttributes(t *testing.T) {
	got, err := backend.NormalizeQueueAttributes(backend.QueueAttributes{VisibilityTimeout: time.Minute})
	if err != nil || got.Retention != backend.DefaultRetention || got.Tags == nil {
		t.Errorf("defaults: %+v, %v; want retention %v and a non-nil tag map", got, err, backend.DefaultRetention)
	}
	tags := map[string]string{"a": "1"}
	got, _ = backend.NormalizeQueueAttributes(backend.QueueAttributes{Tags: tags})
	got.Tags["b"] = "2"
	if len(tags) != 1 {
		t.Errorf("NormalizeQueueAttributes shares the caller's tag map")
	}
	for _, bad := range []backend.QueueAttributes{
		{VisibilityTimeout: -time.Second},
		{VisibilityTimeout: 12*time.Hour + time.Second},
		{VisibilityTimeout: 500 * time.Millisecond},
		{Retention: 59 * time.Second},
		{Retention: 14*24*time.Hour + time.Second},
		{Delay: 15*time.Minute + time.Second},
		{Delay: 1500 * time.Millisecond},
		{Tags: map[string]string{"": "x"}},
	} {
		if _, err := backend.NormalizeQueueAttributes(bad); err == nil {
			t.Errorf("NormalizeQueueAttributes(%+v) succeeded; want an error", bad)
		}
	}
}

func TestValidateCalls(t *testing.T) {
	for _, tc := range []struct {
		what string
		err  error
		ok   bool
	}{
		{"send ok", backend.ValidateSend("x", 15*time.Minute), true},
		{"send empty", backend.ValidateSend("", 0), false},
		{"send negative delay", backend.ValidateSend("x", -1), false},
		{"send max size", backend.ValidateSend(strings.Repeat("x", backend.MaxMessageBytes), 0), true},
		{"send too big", backend.ValidateSend(strings.Repeat("x", backend.MaxMessageBytes+1), 0), false},
		{"receive ok", backend.ValidateReceive(10, 12*time.Hour, 20*time.Second), true},
		{"receive max 0", backend.ValidateReceive(0, 0, 0), false},
		{"receive wait 21s", backend.ValidateReceive(1, 0, 21*time.Second), false},
		{"visibility ok", backend.ValidateVisibility(0), true},
		{"visibility negative", backend.ValidateVisibility(-time.Second), false},
		{"batch ok", backend.ValidateBatch([]string{"a", "b"}), true},
		{"batch empty handle", backend.ValidateBatch([]string{""}), false},
		{"batch duplicate", backend.ValidateBatch([]string{"a", "a"}), false},
		{"batch 11", backend.ValidateBatch(strings.Split("a b c d e f g h i j k", " ")), false},
	} {
		if (tc.err == nil) != tc.ok {
			t.Errorf("%s: %v; want ok=%v", tc.what, tc.err, tc.ok)
		}
	}
}
