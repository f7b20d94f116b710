package local_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rpdhq/rpd/backend"
	"github.com/rpdhq/rpd/backend/backendtest"
	"github.com/rpdhq/rpd/runtime/pickup"
)

// modelMessage is the reference model of one message's SQS state.
type modelMessage struct {
	body      string
	visibleAt time.Time
	handle    string // current delivery's handle; "" before the first
	count     int
	deleted   bool
}

// TestQueueMatchesModel drives the SQLite queue with random sends,
// receives, deletes, visibility changes and clock steps, and checks every
// result against a model of SQS semantics: a message is delivered only when
// visible and not deleted, every visible message is delivered (up to max),
// receive counts increase by one, and a handle works only for the latest
// delivery of an undeleted message.
func TestQueueMatchesModel(t *testing.T) {
	// One file for all runs (opening one per run dominates the cost); each
	// run has its own queue, and the shared clock only moves forward.
	clock := backendtest.NewFakeClock(time.Unix(1_700_000_000, 0))
	b := openAt(t, filepath.Join(t.TempDir(), "model.db"), "s", clock.Now)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		const vis = 30 * time.Second
		run++
		name := fmt.Sprintf("q%d", run)
		if err := b.CreateQueue(ctx, name, backend.QueueAttributes{VisibilityTimeout: vis}); err != nil {
			rt.Fatal(err)
		}
		q := b.Queue(name)
		model := map[string]*modelMessage{} // by body
		var handles []string                // every handle ever issued
		byHandle := map[string]*modelMessage{}
		sent := 0

		visible := func() int {
			n := 0
			for _, m := range model {
				if !m.deleted && !clock.Now().Before(m.visibleAt) {
					n++
				}
			}
			return n
		}
		rt.Repeat(map[string]func(*rapid.T){
			"send": func(rt *rapid.T) {
				delay := time.Duration(rapid.IntRange(0, 3).Draw(rt, "delay")) * 10 * time.Second
				body := fmt.Sprint(sent)
				sent++
				if err := q.Send(ctx, body, delay); err != nil {
					rt.Fatal(err)
				}
				model[body] = &modelMessage{body: body, visibleAt: clock.Now().Add(delay)}
			},
			"receive": func(rt *rapid.T) {
				max := rapid.IntRange(1, 10).Draw(rt, "max")
				want := min(max, visible())
				msgs, err := q.Receive(ctx, max, 0, 0)
				if err != nil {
					rt.Fatal(err)
				}
				if len(msgs) != want {
					rt.Fatalf("received %d messages; model has %d visible (max %d)", len(msgs), want, max)
				}
				for _, got := range msgs {
					m := model[got.Body]
					if m == nil || m.deleted || clock.Now().Before(m.visibleAt) {
						rt.Fatalf("received %q, which the model says is deleted or invisible", got.Body)
					}
					if got.ReceiveCount != m.count+1 {
						rt.Fatalf("receive count of %q is %d; want %d", got.Body, got.ReceiveCount, m.count+1)
					}
					m.count++
					m.handle = got.ReceiptHandle
					m.visibleAt = clock.Now().Add(vis)
					handles = append(handles, got.ReceiptHandle)
					byHandle[got.ReceiptHandle] = m
				}
			},
			"delete": func(rt *rapid.T) {
				if len(handles) == 0 {
					rt.Skip("no handle yet")
				}
				h := rapid.SampledFrom(handles).Draw(rt, "handle")
				m := byHandle[h]
				err := q.Delete(ctx, h)
				if valid := !m.deleted && m.handle == h; valid != (err == nil) || (!valid && !errors.Is(err, pickup.ErrStaleHandle)) {
					rt.Fatalf("Delete(%q of %q) = %v; model says valid=%v", h, m.body, err, valid)
				}
				if err == nil {
					m.deleted = true
				}
			},
			"changeVisibility": func(rt *rapid.T) {
				if len(handles) == 0 {
					rt.Skip("no handle yet")
				}
				h := rapid.SampledFrom(handles).Draw(rt, "handle")
				d := time.Duration(rapid.IntRange(0, 2).Draw(rt, "timeout")) * 20 * time.Second
				m := byHandle[h]
				err := q.ChangeVisibility(ctx, h, d)
				if valid := !m.deleted && m.handle == h; valid != (err == nil) || (!valid && !errors.Is(err, pickup.ErrStaleHandle)) {
					rt.Fatalf("ChangeVisibility(%q of %q) = %v; model says valid=%v", h, m.body, err, valid)
				}
				if err == nil {
					m.visibleAt = clock.Now().Add(d)
				}
			},
			"advance": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(1, 40).Draw(rt, "seconds")) * time.Second)
			},
		})
	})
}

// TestTransitionMatchesModel checks random transitions against a model of
// the conditional update: it succeeds exactly when state, owner and
// threshold match, and a failed one changes nothing.
func TestTransitionMatchesModel(t *testing.T) {
	states := []pickup.State{pickup.StateIdle, pickup.StateClaimed, pickup.StateRetired}
	owners := []string{"", "a", "b"}
	b := openAt(t, filepath.Join(t.TempDir(), "model.db"), "s", nil)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		base := time.Unix(1_700_000_000, 0).UTC()
		model := map[string]pickup.Instance{}
		run++
		p := fmt.Sprintf("r%d-", run)
		for i := 0; i < 3; i++ {
			in := pickup.Instance{ID: fmt.Sprint(p, "i", i), Class: "c", State: pickup.StateIdle, Threshold: base.Add(time.Duration(i) * time.Minute), UpdatedAt: base}
			if err := b.Instances().Put(ctx, in); err != nil {
				rt.Fatal(err)
			}
			model[in.ID] = in
		}
		for step := 0; step < 30; step++ {
			tr := pickup.Transition{
				ID:          p + rapid.SampledFrom([]string{"i0", "i1", "i2", "missing"}).Draw(rt, "id"),
				From:        rapid.SampledFrom(states).Draw(rt, "from"),
				To:          rapid.SampledFrom(states).Draw(rt, "to"),
				ExpectOwner: rapid.SampledFrom(owners).Draw(rt, "expect"),
				Owner:       rapid.SampledFrom(owners).Draw(rt, "owner"),
			}
			if rapid.Bool().Draw(rt, "withNow") {
				tr.Now = base.Add(time.Duration(rapid.IntRange(-1, 3).Draw(rt, "now")) * time.Minute)
			}
			cur, exists := model[tr.ID]
			ok := exists && cur.State == tr.From && cur.Owner == tr.ExpectOwner && (tr.Now.IsZero() || cur.Threshold.After(tr.Now))
			got, err := b.Instances().Transition(ctx, tr)
			if ok != (err == nil) || (!ok && !errors.Is(err, pickup.ErrConditionFailed)) {
				rt.Fatalf("Transition(%+v) on %+v = %v; model says ok=%v", tr, cur, err, ok)
			}
			if ok {
				cur.State, cur.Owner = tr.To, tr.Owner
				if !tr.Now.IsZero() {
					cur.UpdatedAt = tr.Now
				}
				if got.State != cur.State || got.Owner != cur.Owner || !got.Threshold.Equal(cur.Threshold) {
					rt.Fatalf("Transition returned %+v; want %+v", got, cur)
				}
				cur.UpdatedAt = got.UpdatedAt
				model[tr.ID] = cur
			}
			if exists {
				rec, err := b.Instances().Get(ctx, tr.ID)
				if err != nil || rec.State != model[tr.ID].State || rec.Owner != model[tr.ID].Owner {
					rt.Fatalf("after step %d record %+v, %v; model %+v", step, rec, err, model[tr.ID])
				}
			}
		}
	})
}
