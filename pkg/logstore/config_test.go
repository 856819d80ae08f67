package logstore

import (
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/schema"
)

// TestPoliciesAreDefaultedOverriddenAndValidatedAlike walks every
// retention and grace setting: a zero one takes its default, one that an
// override sets replaces the log's (and no other), a negative one is
// refused by name, and none of it touches the log's shape.
func TestPoliciesAreDefaultedOverriddenAndValidatedAlike(t *testing.T) {
	want := map[string]int64{
		"staging_retention":            int64(DefaultStagingRetention),
		"staging_max_bytes":            DefaultStagingMaxBytes,
		"published_snapshot_retention": int64(DefaultPublishedSnapshotRetention),
		"delete_grace":                 int64(DefaultDeleteGrace),
		"local_delete_grace":           int64(DefaultLocalDeleteGrace),
		"retention_grace":              int64(DefaultRetentionGrace),
	}
	d := Config{}.WithDefaults()
	if got := len(d.policies()); got != len(want) {
		t.Fatalf("%d policies, want %d", got, len(want))
	}
	for _, p := range d.policies() {
		if *p.v != want[p.name] {
			t.Errorf("WithDefaults left %s at %d, want %d", p.name, *p.v, want[p.name])
		}
	}
	if d.Start != 1 || d.TargetSealBytes != DefaultTargetSealBytes || d.TargetFileBytes != DefaultTargetFileBytes || d.SortBy == nil {
		t.Errorf("WithDefaults left the shape at %+v", d)
	}

	log := Config{SortBy: []string{"n"}, Published: "pub", TargetFileBytes: 7}.WithDefaults()
	for i := range log.policies() {
		var o Config
		*o.policies()[i].v = 42
		got := log.Override(o)
		for j, p := range got.policies() {
			w := *log.policies()[j].v
			if j == i {
				w = 42
			}
			if *p.v != w {
				t.Errorf("an override of %s left %s at %d, want %d", o.policies()[i].name, p.name, *p.v, w)
			}
		}
		if got.TargetFileBytes != 7 || got.Published != "pub" || len(got.SortBy) != 1 {
			t.Errorf("an override of %s changed the shape: %+v", o.policies()[i].name, got)
		}

		bad := Config{Start: 1}
		*bad.policies()[i].v = -1
		if err := bad.Validate(t.TempDir(), schema.Any()); err == nil || !strings.Contains(err.Error(), bad.policies()[i].name+" is negative") {
			t.Errorf("Validate with %s = -1: %v; want it named as negative", bad.policies()[i].name, err)
		}
	}
}

// TestOverrideTakesTheS3SettingsSet: the S3 settings a maintenance process
// passes replace the log's one by one; those it leaves empty stay.
func TestOverrideTakesTheS3SettingsSet(t *testing.T) {
	log := Config{S3: warehouse.S3{Endpoint: "http://a", Region: "r1"}, DeleteGrace: time.Minute}
	got := log.Override(Config{S3: warehouse.S3{Region: "r2", PathStyle: true}})
	if got.S3 != (warehouse.S3{Endpoint: "http://a", Region: "r2", PathStyle: true}) || got.DeleteGrace != time.Minute {
		t.Fatalf("Override = %+v", got)
	}
}
