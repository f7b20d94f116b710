package api_test

import (
	"encoding/json"
	"fmt"

	"github.com/rpdhq/rpd/api"
)

// Every error the daemon sends has this shape.
func ExampleErrorBody() {
	var eb api.ErrorBody
	_ = json.Unmarshal([]byte(`{"error":{"code":"exhausted","kind":"local","message":"instance i-1 seen 6 times"}}`), &eb)
	eb.Error.Status = 404
	fmt.Println(eb.Error.Code, eb.Error.Kind)
	fmt.Println(eb.Error.Error())
	// Output:
	// exhausted local
	// rpd: exhausted (local, HTTP 404): instance i-1 seen 6 times
}

func ExampleAcquireRequest() {
	p := 10
	b, _ := json.Marshal(api.AcquireRequest{TaskID: "build-42", Priority: &p, Slots: 2, WaitSeconds: 30})
	fmt.Println(string(b))
	// Output:
	// {"task_id":"build-42","priority":10,"slots":2,"wait_seconds":30}
}
