package fixmod

import "testing"

func TestClamp(t *testing.T) {
	if v, err := Clamp(-1, 5); err == nil || v != 0 {
		t.Errorf("Clamp(-1, 5) = %v, %v", v, err)
	}
	if v, err := Clamp(7, 5); err != nil || v != 5 {
		t.Errorf("Clamp(7, 5) = %v, %v", v, err)
	}
	if v, err := Clamp(3, 5); err != nil || v != 3 {
		t.Errorf("Clamp(3, 5) = %v, %v", v, err)
	}
}

func TestLast(t *testing.T) {
	if v := Last(); v != 6 {
		t.Errorf("Last() = %d", v)
	}
}
