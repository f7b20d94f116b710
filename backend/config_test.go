package backend_test

import (
	"testing"

	"github.com/rpdhq/rpd/backend"
)

func TestConfigWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want backend.Config
	}{
		{backend.Config{}, backend.Config{Type: "local", Path: ".rpd/state.db"}},
		{backend.Config{Type: "local", Path: "x.db"}, backend.Config{Type: "local", Path: "x.db"}},
		{backend.Config{Type: "aws"}, backend.Config{Type: "aws", TablePrefix: "rpd-ci"}},
		{backend.Config{Type: "aws", Region: "eu-west-1", TablePrefix: "t"}, backend.Config{Type: "aws", Region: "eu-west-1", TablePrefix: "t"}},
		// An unknown type gets no defaults: opening it is the error.
		{backend.Config{Type: "s3"}, backend.Config{Type: "s3"}},
	} {
		if got := tc.in.WithDefaults("ci"); got != tc.want {
			t.Errorf("%+v.WithDefaults(ci) = %+v; want %+v", tc.in, got, tc.want)
		}
	}
}
