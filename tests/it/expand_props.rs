//! Property tests of matrix expansion (GitHub Actions' rules).

use std::path::Path;

use proptest::prelude::*;
use rocmatrix::matrix_file::{expand, Origin, Spec};

#[derive(Debug, Clone)]
struct Case {
    axes: Vec<Vec<String>>,
    exclude: Vec<Vec<(usize, usize)>>,
    include: Vec<Vec<(String, String)>>,
}

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec(1usize..4, 1..4).prop_flat_map(|sizes| {
        let axes: Vec<Vec<String>> = sizes
            .iter()
            .enumerate()
            .map(|(a, &n)| (0..n).map(|v| format!("v{a}{v}")).collect())
            .collect();
        let n_axes = sizes.len();
        let sizes2 = sizes.clone();
        let exclude = prop::collection::vec(
            prop::collection::vec(
                (0..n_axes).prop_flat_map(move |a| (Just(a), 0..sizes2[a])),
                1..3,
            ),
            0..3,
        );
        let keys: Vec<String> = (0..n_axes)
            .map(|a| format!("a{a}"))
            .chain(["extra".to_string(), "more".to_string()])
            .collect();
        let include = prop::collection::vec(
            prop::collection::vec(
                (
                    prop::sample::select(keys),
                    prop::sample::select(vec!["v00", "v10", "x", "y", "v01"]),
                )
                    .prop_map(|(k, v)| (k, v.to_string())),
                1..3,
            ),
            0..4,
        );
        (Just(axes), exclude, include).prop_map(|(axes, exclude, include)| Case {
            axes,
            exclude,
            include,
        })
    })
}

fn yaml(c: &Case) -> String {
    let mut s = String::from("matrix:\n");
    for (a, vals) in c.axes.iter().enumerate() {
        s += &format!("  a{a}: [{}]\n", vals.join(", "));
    }
    if !c.exclude.is_empty() {
        s += "  exclude:\n";
        for e in &c.exclude {
            let mut first = true;
            let mut seen = Vec::new();
            for &(a, v) in e {
                if seen.contains(&a) {
                    continue;
                }
                seen.push(a);
                s += &format!(
                    "    {} a{a}: {}\n",
                    if first { "-" } else { " " },
                    c.axes[a][v]
                );
                first = false;
            }
        }
    }
    if !c.include.is_empty() {
        s += "  include:\n";
        for e in &c.include {
            let mut seen = Vec::new();
            for (i, (k, v)) in e.iter().enumerate() {
                if seen.contains(k) {
                    continue;
                }
                seen.push(k.clone());
                s += &format!("    {} {k}: {v}\n", if i == 0 { "-" } else { " " });
            }
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn expansion_follows_github_rules(c in case()) {
        let text = yaml(&c);
        let spec = Spec::parse(Path::new("p.yaml"), &text).unwrap();
        let combos = expand(&spec, 4096).unwrap();
        // Deterministic.
        prop_assert_eq!(&combos, &expand(&spec, 4096).unwrap());

        let excluded = |vals: &[(String, String)]| spec.exclude.iter().any(|e| {
            e.pairs.iter().all(|(k, v)| vals.iter().any(|(ck, cv)| ck == k && cv == v))
        });
        // Product cells: exactly the non-excluded product, in odometer order,
        // axis values untouched by include.
        let product: Vec<Vec<(String, String)>> = combos
            .iter()
            .filter(|c| c.origin == Origin::Product)
            .map(|c| spec.axes.iter().map(|a| (a.name.clone(), c.get(&a.name).unwrap().to_string())).collect())
            .collect();
        let mut expected = vec![vec![]];
        for a in &spec.axes {
            expected = expected
                .into_iter()
                .flat_map(|p: Vec<(String, String)>| a.values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((a.name.clone(), v.clone()));
                    p
                }))
                .collect();
        }
        expected.retain(|p| !excluded(p));
        prop_assert_eq!(&product, &expected);
        // Product cells come first; include-created cells follow in include order.
        let first_new = combos.iter().position(|c| c.origin != Origin::Product).unwrap_or(combos.len());
        prop_assert!(combos[first_new..].iter().all(|c| c.origin != Origin::Product));
        let mut last = None;
        for c in &combos[first_new..] {
            if let Origin::Include(i) = c.origin {
                prop_assert!(last.is_none_or(|l| i > l));
                // A new combination is exactly its include entry.
                prop_assert_eq!(&c.values, &spec.include[i].pairs);
                last = Some(i);
            }
        }
        // Excluded pairs never appear, unless an include created that combination.
        for c in &combos {
            if c.origin == Origin::Product {
                let axis_vals: Vec<(String, String)> = c.values.iter().filter(|(k, _)| spec.axis(k).is_some()).cloned().collect();
                prop_assert!(!excluded(&axis_vals));
            }
        }
        // Every include entry is somewhere: merged into an original, or as its own cell.
        for (i, inc) in spec.include.iter().enumerate() {
            let present = combos.iter().any(|c| c.origin == Origin::Include(i))
                || combos.iter().any(|c| c.origin == Origin::Product
                    && inc.pairs.iter().all(|(k, v)| spec.axis(k).is_some() && c.get(k) == Some(v.as_str()) || spec.axis(k).is_none()));
            prop_assert!(present, "include {} lost", i);
        }
    }
}
