// Dtype-selective kernel tables: a selective build (gen/generate.py --only-for MODEL.pte) instantiates each kernel
// only for the dtypes the model's tensors use, which cuts its compile time and binary size. A kernel asked for
// another dtype at run time fails with "unsupported dtype" (the visit in etrt/core/scalar_type.h), never silently.
#pragma once

#include <type_traits>

#include "etrt/core/scalar_type.h"

namespace etrt::selective {

template <class L, class R>
struct concat;
template <class... A, class... B>
struct concat<types<A...>, types<B...>> {
  using type = types<A..., B...>;
};

/// The types of L whose ScalarType code is one of Codes, in L's order.
template <class L, int... Codes>
struct filter;
template <int... Codes>
struct filter<types<>, Codes...> {
  using type = types<>;
};
template <class T, class... Ts, int... Codes>
struct filter<types<T, Ts...>, Codes...> {
  using rest = typename filter<types<Ts...>, Codes...>::type;
  using type = std::conditional_t<((static_cast<int>(dtype_of<T>) == Codes) || ...),
                                  typename concat<types<T>, rest>::type, rest>;
};

/// L narrowed to the model's dtypes; L itself when none of them is in L (an operator whose dtype list does not
/// describe tensors the model holds, such as a shape operator, keeps its list).
template <class L, int... Codes>
using keep_t = std::conditional_t<std::is_same_v<typename filter<L, Codes...>::type, types<>>, L,
                                  typename filter<L, Codes...>::type>;

}  // namespace etrt::selective
