use super::*;

#[test]
fn every_builtin_path_parses() {
    let c = Catalog::new(&[]);
    assert_eq!(c.places().len(), BUILTIN.len());
}

#[test]
fn names_carry_a_group_for_crds_and_apiservices_only() {
    let c = Catalog::new(&[]);
    assert_eq!(
        c.name_form("apiextensions.k8s.io", "CustomResourceDefinition"),
        Some(Form::QualifiedName)
    );
    assert_eq!(
        c.name_form("apiregistration.k8s.io", "APIService"),
        Some(Form::QualifiedName)
    );
    for (g, k) in [
        ("", "ConfigMap"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("samplecontroller.k8s.io", "Foo"),
        ("meta.k8s.io", "PartialObjectMetadata"),
        ("meta.k8s.io", "Table"),
    ] {
        assert_eq!(c.name_form(g, k), None, "{g} {k}");
    }
}

#[test]
fn hidden_items_are_dropped_before_anything_is_renamed() {
    let c = Catalog::new(&[]);
    let list: Vec<Slot> = c.places_for("", "ConfigMapList").map(|p| p.slot).collect();
    let drop = list.iter().position(|s| *s == Slot::DropHidden).unwrap();
    let items = list.iter().position(|s| *s == Slot::Items).unwrap();
    assert!(drop < items);
    let table: Vec<Slot> = c
        .places_for("meta.k8s.io", "Table")
        .map(|p| p.slot)
        .collect();
    assert!(table.iter().any(|s| matches!(
        s,
        Slot::TableRows {
            columns: "columnDefinitions",
            ..
        }
    )));
}

#[test]
fn selectors_pick_kinds_by_app_group() {
    let c = Catalog::new(&[]);
    let crd: Vec<String> = c
        .places_for("apiextensions.k8s.io", "CustomResourceDefinition")
        .map(|p| p.path.to_string())
        .collect();
    assert!(crd.contains(&"metadata.name".to_string()));
    assert!(crd.contains(&"spec.group".to_string()));
    assert!(crd.contains(&"apiVersion".to_string()));
    let list: Vec<Slot> = c.places_for("", "ConfigMapList").map(|p| p.slot).collect();
    assert!(list.contains(&Slot::Items));
    let cm: Vec<String> = c
        .places_for("", "ConfigMap")
        .map(|p| p.path.to_string())
        .collect();
    assert_eq!(
        cm,
        [
            "apiVersion",
            "metadata.ownerReferences[].apiVersion",
            "metadata.ownerReferences[]",
            "metadata.managedFields[].apiVersion",
            "metadata.annotations[\"applyset.kubernetes.io/contains-group-kinds\"]",
            "metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]",
            "metadata.annotations[\"kapp.k14s.io/original\"]"
        ]
    );
}

/// `places_for`'s per-type index gives, in order, exactly the places whose
/// selector matches, for every type a selector names and for others.
#[test]
fn places_for_is_every_matching_place_in_order() {
    let names = regroup_config::load(
        "rules:\n- from: a.example.com\n  to: b.example.com\nnames:\n  prefix: t1-\n  kinds: [ClusterRole, PriorityClass]\n",
    )
    .unwrap();
    let catalogs = [Catalog::new(&[]), Catalog::for_map(&[], &names.map)];
    for c in &catalogs {
        let mut types: Vec<(String, String)> = vec![
            ("".into(), "ConfigMapList".into()),
            ("".into(), "Unheard".into()),
            ("nowhere.example.com".into(), "FooList".into()),
            ("samplecontroller.k8s.io".into(), "Foo".into()),
        ];
        for p in c.places() {
            if let Selector::Kinds { groups, kinds } = &p.selector {
                for g in groups {
                    for k in kinds {
                        types.push((g.clone(), k.clone()));
                        types.push((g.clone(), format!("{k}List")));
                    }
                }
            }
        }
        for (g, k) in &types {
            let want: Vec<*const Place> = c
                .places()
                .iter()
                .filter(|p| p.selector.matches(g, k))
                .map(|p| p as *const Place)
                .collect();
            let got: Vec<*const Place> = c.places_for(g, k).map(|p| p as *const Place).collect();
            assert_eq!(got, want, "{g} {k}");
        }
        assert!(types.len() > 50, "{}", types.len());
    }
}

/// Each type's place tree holds every place of the type once, at the end
/// of its own path, with its way of visiting; the nodes above it say a
/// place of that way lies below.
#[test]
fn the_place_tree_holds_each_place_at_the_end_of_its_path() {
    let names = regroup_config::load(
        "rules:\n- from: a.example.com\n  to: b.example.com\nnames:\n  prefix: t1-\n  kinds: [ClusterRole, PriorityClass]\n  shortNamePrefix: t1-\nmetadata:\n  prefixes:\n    - {from: c.example.io, to: c.team1.example.com}\n",
    )
    .unwrap();
    let catalogs = [Catalog::new(&[]), Catalog::for_map(&[], &names.map)];
    for c in &catalogs {
        let mut types: Vec<(String, String)> = vec![
            ("".into(), "Unheard".into()),
            ("samplecontroller.k8s.io".into(), "FooList".into()),
        ];
        for p in c.places() {
            if let Selector::Kinds { groups, kinds } = &p.selector {
                types.extend(
                    groups
                        .iter()
                        .flat_map(|g| kinds.iter().map(|k| (g.clone(), k.clone()))),
                );
            }
        }
        for (g, k) in &types {
            let (places, tree) = c.places_and_tree(g, k);
            // Every leaf with the steps from the root to it.
            let mut leaves: Vec<(usize, Vec<Step>, Visit)> = Vec::new();
            let mut stack = vec![(0usize, Vec::<Step>::new())];
            while let Some((n, path)) = stack.pop() {
                let node = &tree.nodes[n];
                leaves.extend(node.leaves.iter().map(|l| (l.at, path.clone(), l.visit)));
                for c in &node.children {
                    let mut p = path.clone();
                    p.push(tree.nodes[*c].step.clone());
                    assert!(
                        tree.nodes[*c]
                            .leaves
                            .iter()
                            .all(|l| node.below[l.visit as usize]),
                        "{g} {k}: {p:?}"
                    );
                    stack.push((*c, p));
                }
            }
            leaves.sort_by_key(|l| l.0);
            let want: Vec<(usize, Vec<Step>, Visit)> = places
                .enumerate()
                .filter(|(_, p)| !PlaceTree::from_object(&p.slot))
                .map(|(at, p)| (at, p.path.steps().to_vec(), Visit::of(&p.slot)))
                .collect();
            assert_eq!(leaves, want, "{g} {k}");
            // The places a walk visits whatever the tree finds: exactly
            // those applied from the object or embedding objects, and the
            // random access agrees with the order.
            let (places, _) = c.places_and_tree(g, k);
            let visited: Vec<usize> = places
                .enumerate()
                .filter(|(_, p)| PlaceTree::from_object(&p.slot) || PlaceTree::embeds(&p.slot))
                .map(|(at, _)| at)
                .collect();
            assert_eq!(tree.visited, visited, "{g} {k}");
            // The name form worked out per type is the first name place's
            // by selector, in the catalog's order.
            let by_selector = c
                .places()
                .iter()
                .filter(|p| p.selector.matches(g, k))
                .find_map(name_place);
            assert_eq!(c.name_form(g, k), by_selector, "{g} {k}");
            let view = c.type_places(g, k);
            let (places, _) = c.places_and_tree(g, k);
            for (at, p) in places.enumerate() {
                assert!(std::ptr::eq(view.place(at), p), "{g} {k} {at}");
            }
        }
    }
}

#[test]
fn every_group_of_the_resource_kinds_is_matched() {
    for (g, r, k) in RESOURCE_KINDS {
        assert!(in_resource_kinds(g), "{g}");
        let first = RESOURCE_KINDS
            .iter()
            .find(|(g2, r2, _)| g2 == g && r2 == r)
            .map(|(_, _, k)| *k);
        assert_eq!(Catalog::kind_for_resource(g, r), first, "{g}/{r}/{k}");
    }
    assert_eq!(
        Catalog::kind_for_resource("samplecontroller.k8s.io", "foos"),
        None
    );
}

#[test]
fn resources_whose_names_carry_a_group_are_the_tables_qualified_name_places() {
    // What `qualified_names` keeps, asked of every built-in resource the
    // way the table was scanned before it: the same answer for each.
    let scanned = |group: &str, kind: &str| {
        BUILTIN.iter().any(|(groups, kinds, path, slot)| {
            groups.contains(&group)
                && kinds.contains(&kind)
                && *path == "metadata.name"
                && *slot == Slot::Value(Form::QualifiedName)
        })
    };
    let mut carrying = Vec::new();
    for (g, r, k) in RESOURCE_KINDS {
        assert_eq!(Catalog::names_carry_group(g, r), scanned(g, k), "{g}/{r}");
        if Catalog::names_carry_group(g, r) {
            carrying.push(*r);
        }
    }
    assert!(
        carrying.contains(&"customresourcedefinitions"),
        "{carrying:?}"
    );
    assert!(carrying.contains(&"apiservices"), "{carrying:?}");
    assert!(!Catalog::names_carry_group("", "pods"));
    assert!(!Catalog::names_carry_group(
        "samplecontroller.k8s.io",
        "foos"
    ));
}
