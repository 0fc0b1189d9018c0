// Fixture of tools/mutate/test_mutate.py (not compiled): one line per mutation operator.
namespace demo {

int pick(int a, int b) {
  if (a < b) return a;
  while (a >= 0 && b != 1)
    a = a - 1;
  use(a, b);
  KV_ASSERT(a == b, "assertions are never mutated");
  return 2;  // "strings" and comments < are masked
}

bool check_range(int a) {
  if (a > 0) return true;  // checking functions are skipped
  return false;
}

void guard(int a, int b) {
  KV_ASSERT(a < b || b > a, "a condition on several lines is not mutated either");
}

}  // namespace demo
